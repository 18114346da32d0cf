"""oban-py (oban-bg/oban-py, PyPI ``oban`` 0.7.0) hosted through the worker contract in Python 3.12.

oban-py needs Python >= 3.12, so it runs in another interpreter: ``adapters/python/oban-worker.py``,
with the contract's Python client (``docs/reference/contract.md``). The interpreter is
``$PGJC_PYTHON312``, else pyenv's ``versions/3.12*/bin/python3.12`` (the ``python3.12`` shim may not
run); ``pip install -r adapters/python/oban-requirements.txt`` into it. What oban does, from its
source (``oban/``, 0.7.0):

- ``queries/fetch_jobs.sql``: ``FOR UPDATE SKIP LOCKED``, ``attempt + 1``, ``state = 'executing'``,
  ``attempted_at = now()`` -- while ``attempt < max_attempts``;
- ``queries/ack_job.sql``: every finish (complete, retry, discard) matches ``state = 'executing' AND
  attempted_at = %(attempted_at)s``: **fenced per attempt** -- a stale execution's ack changes nothing;
- ``_lifeline.py`` / ``queries/rescue_jobs.sql``: every ``interval`` (60 s) the leader puts an
  ``executing`` job attempted more than ``rescue_after`` (300 s) ago back to ``available`` (or
  ``discarded`` when its attempts are spent). No heartbeat: a job that runs longer than
  ``rescue_after`` is rescued while it runs.

``--design-option fairness=per-tenant-queue`` (issue 38; default ``off``): a queue per tenant ("queues: Queue
names mapped to worker limits", ``oban.py``), the worker running those the run's jobs were inserted into,
each at ``queue_limit`` (default 10, the docs' example). Oban Pro's partitioned global limits are not in
oban-py.

Status mapping: ``available``, ``scheduled``, ``retryable`` -> ``queued``; ``executing`` -> ``running``;
``completed`` -> ``done``; ``discarded``, ``cancelled`` -> ``dead``. ``lease_expired`` is not read (None).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from ..core.errors import UsageError
from ..workers.hosted import timing
from ..workers.hosted.contract import ContractDesign

REQUIREMENTS = Path(__file__).parent / "python" / "oban-requirements.txt"
ENV = "PGJC_PYTHON312"

TIMING = timing.Intervals("oban", anchors={"lease": "rescue after"}, intervals=(
    timing.Interval("rescue after", 300.0, kind=timing.WAIT, setting='lifeline={"rescue_after": 300}'),
    timing.Interval("lifeline interval", 60.0, recovery=True, setting='lifeline={"interval": 60}'),
    timing.Interval("refresher interval", 15.0, setting='refresher={"interval": 15}'),
    timing.Interval("producer max age", 60.0, kind=timing.WAIT, setting='refresher={"max_age": 60}'),
    timing.Interval("stager interval", 1.0, setting='stager={"interval": 1}'),
    # Not a setting: Oban() builds its Leader with the default interval (_leader.py, 30 s; the
    # leadership lasts int(interval) s). A worker that dies leading leaves no lifeline until it
    # lapses: the run's limits stretch by it (reported, never raising the scale: none could keep it).
    timing.Interval("leadership interval", 30.0, grid=timing.FIXED, recovery=True, bound=None,
                    setting="_leader.Leader(interval=30.0)"),
))


def python312() -> str | None:
    """The Python 3.12 interpreter oban runs in, or None."""
    if os.environ.get(ENV):
        return os.environ[ENV]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", "3.12*", "bin", "python3.12")))
    return found[-1] if found else None


class Oban(ContractDesign):
    """oban-py 0.7.0 in Python 3.12, through the contract."""

    name = library = "oban"
    SCRIPT = Path(__file__).parent / "python" / "oban-worker.py"  # run by Python 3.12 (client)
    TIMING = TIMING
    # Below it oban's loops spin: the stager would poll more often than every 3 ms, the refresher
    # every 50 ms, in their documented ratios to a lease under 1 s.
    min_time_scale = 1.0
    # Its lifeline's rescue (_lifeline.py:69-84 -> _query.py:296-298, queries/rescue_jobs.sql), the leader's,
    # by its digest (tests/unit/test_recovery_statements.py derives it).
    recovery_statements = ("284937a2",)
    # The queue's limit as the docs' example starts it, queues={"default": 10} (python/oban-worker.py work()):
    # oban-py has none of its own ("queues: Queue names mapped to worker limits (default: {})", oban.py:84);
    # a producer takes limit - running jobs at a fetch (_producer.py:59).
    concurrency = 10
    OPTIONS = {"fairness": "off (default): one queue, default; per-tenant-queue: a queue per tenant, each "
                           "at the same limit (per-queue limits; Pro's partitioning is not open)",
               "queue_limit": "every queue's limit (default 10, the docs' example)"}

    def __init__(self, **options: str):
        super().__init__(**options)
        self.choice("fairness", ("off", "per-tenant-queue"))  # a usage error before any server starts
        self.concurrency = self.whole("queue_limit", 10)

    def client(self) -> tuple[str, ...]:
        python = python312()
        if python is None:
            raise UsageError(f"design oban: oban-py needs Python 3.12; none found (set {ENV}, or install "
                             f"one with pyenv, then pip install -r {REQUIREMENTS})")
        return (python, str(self.SCRIPT))
