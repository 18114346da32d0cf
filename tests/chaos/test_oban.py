"""oban-py (the real library, Python 3.12, adapters/oban.py through the worker contract) under the
harness: fault-free, a transient raise, an overrun and a crash, each asserting what oban's code implies
(oban 0.7.0):

- queries/fetch_jobs.sql: ``attempt + 1`` at each fetch (the attempt the body is told);
- queries/ack_job.sql: every ack matches ``attempted_at``: a stale execution's ack changes nothing;
- queries/rescue_jobs.sql (the lifeline): an ``executing`` job attempted more than ``rescue_after``
  ago is made available again -- no heartbeat, so a job running longer is rescued while it runs.

A crash costs up to ~35 s: when the dead worker led, nobody rescues until oban's fixed 30 s
leadership lapses (adapters/oban.py TIMING); otherwise about 7 s. Budget: about 40-70 s in all (four
runs at time scale 1, the least adapters/oban.py allows)."""

from __future__ import annotations

import pytest

from pg_job_chaos.adapters.oban import Oban, python312
from pg_job_chaos.core import overlap
from pg_job_chaos.core.schedule import JobSpec
from tests.hosted_runs import run_hosted
from tests.hosted_runs import violated as _violated

pytestmark = [pytest.mark.chaos]

_python = python312()
if _python is None:
    pytest.skip("oban-py needs Python 3.12 and none was found (PGJC_PYTHON312 or pyenv's 3.12)",
                allow_module_level=True)


def _oban_missing() -> str | None:
    import subprocess
    r = subprocess.run([_python, "-c", "import oban, psycopg_pool"], capture_output=True, text=True)
    return None if r.returncode == 0 else (f"oban is not installed in {_python}: "
                                           f"pip install -r adapters/python/oban-requirements.txt")


if (missing := _oban_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

SCALE = Oban.min_time_scale


def _run(runner, jobs, **kw):
    return run_hosted(runner, "oban", SCALE, jobs, **kw)


def test_fault_free_every_job_done_once(runner):
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=0.01) for i in range(1, 7)])
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)] * 6
    assert _violated(r) == set(), {n: x.evidence for n, x in r.items() if x.status == "violated"}
    # oban's own record (the descriptor's accepted_finishes): one completion a job, each one's
    assert r["library-one-finish"].status == "held", r["library-one-finish"].evidence


def test_a_transient_raise_is_retried_to_done(runner):
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="raise", strikes=1)], workers=1)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
    assert [e.attempt for e in h.executions()] == [1, 2]
    assert r["transient-recovers"].status == "held"
    # errors[0] names attempt 1 (the raise), then the completion: both attributed, neither stale
    assert [(f["outcome"], f["attempt"]) for f in h.finishes[0]["finishes"]] == [("failure", 1),
                                                                                 ("success", 2)]
    assert r["library-one-finish"].status == "held", r["library-one-finish"].evidence


def test_an_overrun_is_rescued_while_it_runs(runner):
    """No heartbeat: past rescue_after the lifeline makes the running job available and it runs again
    again; the first execution's ack then matches no attempted_at and changes nothing. Whether the two
    overlap depends on which worker's producer fetches it (on the same one it waits for the body's one
    connection): the re-runs and their second commit do not.

    At time scale 2, not oban's least 1: each rescue comes 1.0-1.2 leases into an execution (rescue_after
    plus the lifeline's tick) and must beat its ack at 1.5 leases -- 0.3 s to spare at 1 (a stall beside
    busy loops loses it), 0.6 s here."""
    h, r = run_hosted(runner, "oban", 2 * SCALE, [JobSpec(1, tenant=1, fault="overrun")])
    assert [e.attempt for e in h.executions()] == [1, 2, 3]
    assert "single-commit" in _violated(r), r["single-commit"].evidence
    # every execution overruns: each is rescued, the last to discarded (attempt >= max_attempts), and
    # its late ack -- a success -- matches no attempted_at: the job stays dead, as oban recorded it
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("dead", 3)]
    assert r["done-means-committed"].status == "held" and r["tenant-isolation"].status == "held"
    # the fence seen from oban's side: no ack of a rescued execution was taken (no error, no completion)
    assert h.finishes[0]["finishes"] == [] and r["library-one-finish"].status == "held"


def test_a_crash_is_rescued_by_the_lifeline_and_retried(runner):
    """No heartbeat: the dead worker's job stays ``executing`` until the leader's lifeline finds it
    attempted more than ``rescue_after`` ago (rescue_jobs.sql) and makes it available, counted: the
    next fetch is attempt 2. When the dead worker was the leader, nobody rescues until its fixed 30 s
    leadership lapses (_leader.py; reported, and the run's limits stretch by it): up to ~35 s here."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="crash", strikes=1)], restarts=1)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
    assert [e.attempt for e in h.executions()] == [1, 2]
    assert {"attempts-counted", "bounded-attempts", "terminal-states"}.isdisjoint(_violated(r))
    # oban's record: the retry's completion (the crash appended no error: the lifeline's rescue is no finish)
    assert [(f["outcome"], f["attempt"]) for f in h.finishes[0]["finishes"]] == [("success", 2)]
    assert r["library-one-finish"].status == "held", r["library-one-finish"].evidence


def test_bodies_run_at_the_queues_limit(runner):
    """The queue's limit 10 (queues={"default": 10}): a producer fetches limit - running jobs
    (_producer.py), and the contract client gives each body a thread and a connection: ten jobs of one
    worker run at once."""
    # Half a lease each at time scale 2 (1 s bodies): ten threads and their connections start within one
    # body beside busy loops too (0.3 s at 1 was tight), and no body comes near rescue_after (a lease: 2 s),
    # past which the lifeline would run it again beside itself (2 s bodies at 1 made 16 at once)
    h, r = run_hosted(runner, "oban", 2 * SCALE, [JobSpec(i, tenant=i, duration=0.5) for i in range(1, 11)],
                      workers=1)
    assert h.ended_by == "quiescent"
    assert Oban.concurrency == 10
    assert overlap.bodies_at_once(h).worker == 10
