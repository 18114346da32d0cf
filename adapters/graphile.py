"""graphile-worker (graphile/worker, npm ``graphile-worker`` 0.17.3) through the worker contract in Node.

The queue's code is graphile-worker's own, run by ``adapters/node/graphile-worker.js`` as its README
configures it (``docs/reference/contract.md`` for the contract; :mod:`workers.hosted.contract` for the
harness's side). What it does, read from its source (``dist/``, 0.17.3):

- ``sql/getJobs.js``: the fetch claims with ``FOR UPDATE SKIP LOCKED`` where ``is_available`` (``locked_at
  is null and attempts < max_attempts``, ``sql/000011.sql``), sets ``attempts = attempts + 1``,
  ``locked_by`` (the pool's id) and ``locked_at = now()``: ``job.attempts`` is the attempt the body is told;
- ``sql/completeJobs.js``: a success **deletes** the row (``where id = $1``, not fenced by ``locked_by``);
  ``sql/failJobs.js``: a failure, fenced by ``locked_by``, unlocks it with ``run_at`` pushed by
  ``exp(least(attempts, 10))`` seconds -- fixed in its SQL, not a setting;
- ``sql/resetLockedAt.js``: the only recovery: every 8-10 minutes (``minResetLockedInterval`` ..
  ``maxResetLockedInterval``), a job locked more than **4 hours** is unlocked. No heartbeat, no
  expiry while its worker lives: a crashed worker's job stays locked, and not retried, for 4 hours;
  an overrun is never taken from a live worker.

Status mapping (the descriptor's SQL, over graphile's ``jobs`` view and the harness's ``job_map``): a
locked row -> ``running``; an unlocked row with ``attempts >= max_attempts`` -> ``dead``; else ``queued``.
A success deletes the row and its count with it, so the install keeps a shadow table of deleted jobs
(the pattern graphile's docs give for tracking completed jobs): an ``AFTER DELETE`` row trigger on
``_private_jobs`` copies the row's own ``attempts`` as graphile deletes it. A mapped job found there
-> ``done`` with those attempts (graphile deletes a job only on success here: no ``jobKey``, no admin
function called); in neither table -> ``missing``, unmapped, so the properties that read it say
unknown. ``lease_expired``: a locked job past the 4 hour lock timeout.

Design option ``fairness`` (issue 38): ``off`` (default, the README's: no ``queueName``); ``per-tenant-queue``
adds each job with ``queueName: tenant_<id>`` (``TaskSpec.queueName``: "only specify if you want jobs
in this queue to run serially"), so one tenant holds at most one worker at a time.

The worker role owns graphile's schema (its tables enable row level security with no policy: only
their owner reads them; graphile's worker runs its own migrations, as their owner, at every start).

Versions (issue 48: the corpus runs older ones beside the pinned 0.17.3), chosen by the version the client
describes (``require('graphile-worker/package.json').version``, in the descriptor; :func:`legacy`):
``>= 0.16`` is hosted as above; ``< 0.16`` (0.14.0-rc.0, 0.15.x: the corpus's #352 case) keeps its job rows
in the tables ``jobs`` and ``job_queues`` themselves (``sql/000011.sql``; no ``_private_`` tables, no view),
so the client's reset truncates those and the shadow table's delete trigger sits on ``jobs``; the columns
read are the same. What the adapter relies on is the same there: ``completeJob`` deletes the row on
success (``src/sql/completeJob.ts``, awaited, ``src/worker.ts:331``), ``failJob(s)`` unlock it with the same
``exp(least(attempts, 10))`` backoff, and the fetch takes only ``is_available`` rows (``locked_at is null
and attempts < max_attempts``, ``sql/000011.sql:66``): the shadow table's record of an accepted success is
as complete as at 0.17.3. The one recovery is the same 4 hour ``resetLockedAt``, its text older
(:data:`RECOVERY`). The client's SQL: ``adapters/node/graphile-worker.sql``.

A deploy's SIGTERM reaches graphile's own handler, whose last step is to kill its own process by the
signal once it has removed itself ("killing self via SIGTERM"); the client lets that end the process, as
Node's default does where no other listener is left (the contract client's own would swallow it:
``selfKill`` in the client). Before 0.15.1 that step follows a shutdown that failed the jobs in hand
(graphile/worker #352, the corpus's case); since, one that waited for them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..core.errors import UsageError
from ..workers.hosted import timing
from ..workers.hosted.contract import ContractDesign

TIMING = timing.Intervals("graphile-worker", anchors={"lease": "lock timeout"}, intervals=(
    # The schedule's lease is its stall timeout, and graphile's is 4 hours in SQL (resetLockedAt.js,
    # "interval '4 hours'"), not a setting: the ratio breaks and every run's notes say so. Not a
    # recovery interval: stretching the run's limits by 4 h is no run; a crashed worker's job is
    # left locked within the run, which is what graphile documents.
    timing.Interval("lock timeout", 14400.0, grid=timing.FIXED, kind=timing.WAIT, bound=None,
                    setting="resetLockedAt: locked_at < now() - interval '4 hours' (fixed)"),
    # The rest keep their documented ratios to that fixed anchor: their documented defaults.
    timing.Interval("poll interval", 2.0, setting="run({pollInterval: 2000})"),
    # How often resetLockedAt runs: it frees nothing younger than 4 hours, so no stretch of the run.
    timing.Interval("min reset locked interval", 480.0, setting="run({minResetLockedInterval: 480000})"),
    timing.Interval("max reset locked interval", 600.0, setting="run({maxResetLockedInterval: 600000})"),
    # SQL, not a setting (failJobs.js): the wait before a retry is exp(least(attempts, 10)) s; the
    # longest at the schedule's default max_attempts 3 is exp(2) s (before attempt 3), and nothing
    # wakes a worker at run_at: the next poll (2 s) finds it. It stretches the run's stall limit so
    # a retry is not cut off at any time scale; reported, never raising the time scale.
    timing.Interval("retry backoff", math.exp(2) + 2.0, grid=timing.FIXED, kind=timing.WAIT, recovery=True,
                    bound=None, setting="failJobs: run_at + exp(least(attempts, 10)) s (fixed), then a poll"),
))


# Its only recovery statement, resetLockedAt, by the digest of its text as the library sends it (useNodeTime
# false, its default): since 0.16 dist/sql/resetLockedAt.js:4-21 over _private_jobs / _private_job_queues
# ("8e7bbd61"); before, over jobs / job_queues (0.14.0-rc.0 and 0.15.1 dist/sql/resetLockedAt.js,
# "5f16a452"). tests/unit/test_recovery_statements.py derives the pinned one.
RECOVERY = {False: ("8e7bbd61",), True: ("5f16a452",)}


def legacy(version: str) -> bool:
    """Whether graphile-worker *version* (as its package.json says it: ``0.15.1``, ``0.14.0-rc.0``) is
    hosted by the pre-0.16 variant (job rows in ``jobs`` itself, the module docstring's "Versions"). A
    version with no ``major.minor`` is a :class:`ValueError`: the client described something else."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", str(version))
    if m is None:
        raise ValueError(f"graphile-worker version {version!r}: no major.minor")
    return (int(m.group(1)), int(m.group(2))) < (0, 16)


class GraphileWorker(ContractDesign):
    """graphile-worker 0.17.3 (or, in the corpus, the version installed where the client finds it) in Node,
    through the contract (``adapters/node/graphile-worker.js``); ``legacy`` says which variant hosts it."""

    name = library = "graphile-worker"
    one_host = True  # node-postgres: a multi-host DSN is "Invalid URL" (issue 37); the replica endpoint
    TIMING = TIMING
    SCRIPT = Path(__file__).parent / "node" / "graphile-worker.js"  # run by node
    # None: no interval of graphile's follows the time scale (the anchor is fixed), so no scale
    # breaks a ratio that a larger one keeps.
    min_time_scale = TIMING.min_time_scale()
    # Its only recovery: resetLockedAt (dist/sql/resetLockedAt.js:4-21, from main.js:203-253), by its digest
    # (tests/unit/test_recovery_statements.py derives it). Its fetch takes no locked job (is_available,
    # sql/000011.sql:67): no get_job takes an expired lock. An instance sets the version's (RECOVERY).
    recovery_statements = RECOVERY[False]
    OPTIONS = {"fairness": "off (default): no queueName; per-tenant-queue: queueName tenant_<id> "
                           "(graphile runs one queue's jobs in series)"}
    concurrency = 1  # concurrentJobs: 1, graphile-worker's default (dist/config.js:20-21)

    def __init__(self, **options: str):
        super().__init__(**options)  # asks the client to describe itself: its version among it
        self.version = str(self.descriptor.get("version", ""))
        try:
            self.legacy = legacy(self.version)
        except ValueError as exc:
            raise UsageError(f"design {self.name}: the client describes {exc}") from None
        self.recovery_statements = RECOVERY[self.legacy]
        # an unknown value is a usage error before any server starts
        fairness = self.choice("fairness", ("off", "per-tenant-queue"))
        # per-tenant-queue: queueName tenant_<id> (node/graphile-worker.js), "only specify if you want jobs
        # in this queue to run serially" (interfaces.d.ts, TaskSpec.queueName)
        self.tenant_cap = 1 if fairness == "per-tenant-queue" else None
