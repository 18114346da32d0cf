"""Issue 36 item 1: a fault that ends or cuts a worker strikes after a statement's reply and at a
COMMIT (workers/body/statements.py); the planted split finish dies between its two commits."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.events import LogEvent
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.harness.bench import planted
from pg_job_chaos.properties import check

pytestmark = pytest.mark.chaos

SCALE = 0.2
FINISH_COMMITTED = "sql:commit:lease.finish_fenced:after"  # lease-heartbeat's finishing transaction
WORK_COMMITTED = "sql:commit:body.insert_finished_run:after"  # the split finish's first transaction


def _struck(h, point: str) -> list[dict]:
    return [r for r in h.records if r.get("event") == LogEvent.FAULT and r.get("point") == point]


def test_a_crash_after_the_finishs_commit_ends_the_worker_with_the_job_done(runner):
    """The point is logged, the worker died there, and what it committed stays: done, one job_runs row."""
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="crash", point=FINISH_COMMITTED),), workers=1,
                            design="lease-heartbeat", time_scale=SCALE))
    (struck,) = _struck(h, FINISH_COMMITTED)
    assert (struck["job"], struck["attempt"], struck["fault"]) == (1, 1, "crash")
    died = [x for x in h.exits if not x.by_harness]
    assert [(x.outcome, x.job, x.attempt) for x in died] == [("exit 1", 1, 1)]
    assert died[0].worker == struck["worker"]
    assert h.jobs[0]["status"] == "done" and len(h.runs) == 1
    assert not [e for e in h.executions() if e.attempt > 1]  # committed: nobody runs it again
    assert (FINISH_COMMITTED, True) in h.statements()


def test_a_crash_before_the_commit_leaves_nothing_committed(runner):
    point = "sql:commit:lease.finish_fenced"
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="crash", point=point, strikes=1),), workers=1,
                            design="lease-heartbeat", time_scale=SCALE))
    assert _struck(h, point) and [x.outcome for x in h.exits if not x.by_harness] == ["exit 1"]
    assert h.jobs[0]["status"] == "done" and len(h.runs) == 1  # the second attempt's, the first rolled back
    assert sorted({e.attempt for e in h.executions()}) == [1, 2]


@pytest.mark.parametrize("how", ["crash", "kill"])
def test_the_split_finish_dies_between_its_two_commits(runner, how):
    job = JobSpec(1, fault="crash", point=WORK_COMMITTED, strikes=1) if how == "crash" else JobSpec(1)
    events = (Event("kill", 1, WORK_COMMITTED),) if how == "kill" else ()
    h = runner.run(Schedule(jobs=(job,), events=events, workers=1,
                            design=planted.spec("SplitFinish"), time_scale=SCALE))
    assert check(h)["single-commit"].status == "violated", check(h)["single-commit"].evidence
    healthy = runner.run(Schedule(jobs=(job,), events=events, workers=1, design="lease-heartbeat",
                                  time_scale=SCALE))  # the design it derives from: no such point, held
    assert check(healthy)["single-commit"].status == "held"
