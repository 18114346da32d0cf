"""awa (the real library, adapters/awa.py, awa-pg 0.6.9) under the harness: fault-free, a transient
raise, a crash loop and an overrun, each asserting what awa's own code implies (lines of hardbyte/awa
v0.6.5, the newest tag stored; the installed 0.6.9 behaves as they say, measured):

- awa-model/queries/claim.sql:31-32: every claim adds 1 to ``attempt`` and to ``run_lease``;
- awa-worker/src/executor.rs:1237: a raise is ``retryable`` at ``now() + awa.backoff_duration`` (2^attempt s);
- awa-worker/src/maintenance.rs:1250: the heartbeat rescue makes a stale ``running`` job ``retryable``
  and reads no ``max_attempts``: a job that kills its worker every time is claimed again and again;
- awa-worker/src/client.rs:1578-1580: the heartbeat service gets the builder's storage (queue storage
  by default, client.rs:172-181), not the storage the runtime resolved (client.rs:1506, canonical here:
  the jobs were queued before the first worker started), so ``awa.jobs.heartbeat_at`` is never
  refreshed and a live job running past ``heartbeat_staleness`` is rescued and run again.
"""

from __future__ import annotations

import pytest

pytest.importorskip("awa", reason="awa-pg is not installed (pip install -e '.[libraries]')")

from pg_job_chaos.adapters.awa import Awa  # noqa: E402
from pg_job_chaos.core.schedule import JobSpec  # noqa: E402
from tests.hosted_runs import run_hosted  # noqa: E402

pytestmark = [pytest.mark.chaos]

DESIGN = "pg_job_chaos.adapters.awa:Awa"
SCALE = Awa.min_time_scale  # 0.36: the 250 ms promote interval at 1 ms (adapters/awa.py)
CORRECT = ("tenant-isolation", "done-means-committed", "attempts-counted", "pool-hygiene")


def _run(runner, jobs, **kw):
    return run_hosted(runner, DESIGN, SCALE, jobs, **kw)


def _errors(runner, job: int) -> list[str]:
    """awa's own record of the failures of a schedule job (awa.jobs.errors), read before the next reset."""
    (errors,) = runner.admin.execute(
        "select coalesce(array(select e ->> 'error' from unnest(j.errors) e), '{}') from awa.jobs j "
        "join job_map m on m.library_id = j.id::text where m.job_id = %s", [job]).fetchone()
    return list(errors)


def test_fault_free_every_job_done_once(runner):
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=0.01) for i in range(1, 7)])
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)] * 6
    assert sorted(x["job_id"] for x in h.runs) == list(range(1, 7))
    for name in (*CORRECT, "single-commit", "at-most-once-effects", "no-overlap", "bounded-attempts",
                 "progress", "terminal-states"):
        assert r[name].status == "held", (name, r[name].evidence)


def test_a_transient_raise_is_retried_after_awas_backoff(runner):
    """executor.rs:1237: retryable at now() + backoff_duration(1) = 2-2.5 s, real at any time scale."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="raise", strikes=1)], workers=1)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
    first, second = h.executions()
    assert (first.attempt, second.attempt) == (1, 2)  # job.attempt, as the claim counts it
    assert second.start - first.end >= 1.9  # 2^1 s, less the clock's grain
    assert r["transient-recovers"].status == "held" and r["done-means-committed"].status == "held"


def test_a_crash_loop_is_rescued_past_max_attempts(runner):
    """Job 1 kills its worker on every execution. The heartbeat rescue (maintenance.rs:1250) makes it
    retryable whatever its attempt, so it is claimed until the restart budget is spent: 2 workers +
    1 restart = 3 executions of a job whose max_attempts is 2. awa counts each one (claim.sql:31)."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=0.05, fault="crash", point="mid-work")],
                max_attempts=2, restarts=1)
    assert h.ended_by == "workers-exhausted"
    ones = h.executions()
    assert [e.attempt for e in ones] == [1, 2, 3] and len({e.worker for e in ones}) == 3
    (state,) = h.jobs
    assert state["attempts"] == 3 and state["status"] in ("running", "queued")
    assert _errors(runner, 1)[:2] == ["heartbeat stale: worker presumed dead"] * 2
    assert r["bounded-attempts"].status == "violated", r["bounded-attempts"].evidence
    assert "job 1 executed 3 times (max_attempts 2)" in r["bounded-attempts"].evidence
    assert r["attempts-counted"].status == "held", r["attempts-counted"].evidence


def test_an_overrun_is_rescued_from_a_live_worker(runner):
    """The body works 1.5 leases (heartbeat_staleness) on a live worker. Its heartbeat never reaches
    awa.jobs (client.rs:1578-1580): the rescue takes the job as dead and the same worker claims it
    again. A dequeue budget of 2 ends the run (awa would re-run it until the deadline)."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="overrun")], workers=1, dequeues=2, restarts=0)
    ones = h.executions()
    # two dequeues, and a rescue may hand it over once more before the budget is seen (a loaded machine)
    assert [e.attempt for e in ones][:2] == [1, 2] and {e.worker for e in ones} == {"w1.0"}
    assert "heartbeat stale: worker presumed dead" in _errors(runner, 1)
    assert r["single-commit"].status == "violated", r["single-commit"].evidence
    assert r["tenant-isolation"].status == "held"
