"""db-scheduler (the real library, Java, adapters/db_scheduler.py through the worker contract's Java client)
under the harness: fault-free, and a crash that its dead-execution detection recovers, each asserting what
db-scheduler's own code implies (v16.7.1):

- ``Scheduler.detectDeadExecutions``: a picked execution whose ``last_heartbeat`` is older than
  ``heartbeatInterval x missedHeartbeatsLimit`` is handed to the task's ``ReviveDeadExecution``, which
  reschedules it now as a failure (``consecutive_failures + 1``): how the job of a dead worker comes back,
  never before its last heartbeat is that old -- and never the job of a live worker, whose heartbeats go on;
- ``JdbcTaskRepository.remove`` (fenced by ``version``): the completion deletes the row once;
- ``Scheduler.stop`` (a deploy's SIGTERM, through the Java client): the running executions finish within
  ``shutdownMaxWait`` and are completed, nothing more is picked.

Budget: about 40 s on this machine (four runs, at time scales 2 and 3; a JVM's start is most of each)."""

from __future__ import annotations

import pytest

from pg_job_chaos.adapters.db_scheduler import TIMING
from pg_job_chaos.core.schedule import JobSpec, Timing
from pg_job_chaos.workers.hosted import jvm
from tests.hosted_runs import deploy_finishes_the_job_in_hand, fault_free_every_job_done_once, run_hosted
from tests.hosted_runs import violated as _violated

pytestmark = [pytest.mark.chaos]

if (missing := jvm.missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

# The lease (db-scheduler's dead-execution threshold, heartbeatInterval x 6) is 2 s at time scale 2: the
# heartbeat every 1/3 s, the check every 2/3 s -- slower than a starting JVM's pauses on a loaded machine
# (adapters/db_scheduler.py, min_time_scale).
SCALE = 2.0
# The crash runs at 3: the threshold (3 s) is then longer than a replacement JVM takes to start and look
# (about 1 s after the crash, measured), so a revival that did not wait for the stale heartbeat would
# come too soon for the test.
DEAD_SCALE = 3.0


def _run(runner, jobs, scale=SCALE, **kw):
    return run_hosted(runner, "db-scheduler", scale, jobs, **kw)


def test_fault_free_every_job_done_once(runner):
    h, r = fault_free_every_job_done_once(runner, "db-scheduler", SCALE)


def test_a_crashed_execution_is_revived_once_its_heartbeat_is_stale(runner):
    """Job 1 kills its only worker once, as its body begins (``before-tenant``: nothing committed). The
    replacement starts at once (no restart delay), and its housekeeper sees the picked row at its first
    check; it revives it only once the row's last heartbeat is older than the threshold -- and no heartbeat
    predates the first client's start (its ``client-start``, written before its scheduler starts) -- then
    runs it as attempt 2 (the revival counts a failure)."""
    job = JobSpec(1, tenant=1, duration=0.05, fault="crash", point="before-tenant", strikes=1)
    h, r = _run(runner, [job], scale=DEAD_SCALE, workers=1, restarts=1, timing=Timing(restart_delay=0.0))
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
    first, second = h.executions()
    assert (first.worker, first.attempt, [f["point"] for f in first.faults]) == ("w1.0", 1, ["before-tenant"])
    assert (second.worker, second.attempt, second.outcome) == ("w1.1", 2, "ok")
    assert [(x["worker"], x["attempt"]) for x in h.runs] == [("w1.1", 2)]
    began = min(x["t"] for x in h.records if x.get("event") == "client-start" and x.get("worker") == "w1.0")
    dead_after = TIMING.values(h.schedule)["dead execution after"]  # 3 s at time scale 3
    assert second.start - began >= dead_after, (second.start - began, dead_after)
    assert _violated(r) == set(), {n: x.evidence for n, x in r.items() if x.status == "violated"}


def test_an_overrun_keeps_its_heartbeat_and_runs_once(runner):
    """The work lasts 1.5 leases -- past the dead-execution threshold -- on a live worker: its heartbeats
    go on (every 1/6 lease), so no scheduler finds it dead, and it runs once (River's JobTimeout would
    cut it; db-scheduler has none). Run at DEAD_SCALE: a 3 s threshold, far above a loaded machine's
    pauses of the heartbeat thread."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="overrun"), JobSpec(2, tenant=2)], scale=DEAD_SCALE)
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)] * 2
    (overrun,) = [e for e in h.executions() if e.job == 1]
    dead_after = TIMING.values(h.schedule)["dead execution after"]  # the lease: 3 s at time scale 3
    assert overrun.outcome == "ok" and overrun.end - overrun.start >= 1.5 * dead_after
    assert sorted(x["job_id"] for x in h.runs) == [1, 2]
    assert _violated(r) == set(), {n: x.evidence for n, x in r.items() if x.status == "violated"}


def test_a_deploys_sigterm_lets_the_execution_in_hand_finish_through_stop(runner):
    """SIGTERM mid-work (a rolling deploy): the Java client's handler makes mayDequeue false and
    ``Scheduler.stop()`` waits for the execution in hand, which finishes and is completed once; the worker
    exits by itself within the grace (30 s, scaled), and its replacement runs the rest."""
    h, r = deploy_finishes_the_job_in_hand(runner, "db-scheduler", SCALE)
    assert _violated(r) == set(), {n: x.evidence for n, x in r.items() if x.status == "violated"}
