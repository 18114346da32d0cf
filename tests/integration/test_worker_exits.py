"""How a worker's ``run_worker`` returning is recorded (``core/events.py``'s ``WorkerExitReason``): a user's
worker that stops by itself after its first job while jobs remain (``tests/own_stops.py``) is recorded
``stopped-by-itself`` with its log's last line and replaced, and the run completes; the same worker
run to its dequeue budget is recorded ``budget`` and not replaced."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.events import LogEvent, WorkerExitReason
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.report.text import timeline
from pg_job_chaos.properties import HELD, check
from tests import own_stops

pytestmark = pytest.mark.integration

DESIGN = "tests.own_stops:StopsByItself"  # by module: the test reads own_stops.said, one module
SCALE = 0.2


def _reasons(h) -> dict[str, str]:
    return {r["worker"]: r["reason"] for r in h.records if r["event"] == LogEvent.WORKER_EXIT}


def test_a_worker_that_stops_by_itself_is_recorded_with_its_last_line_and_replaced(runner):
    s = Schedule(jobs=tuple(JobSpec(i, tenant=i) for i in range(1, 4)), workers=1, design=DESIGN,
                 design_options={"stop_after": "1"}, time_scale=SCALE)  # no dequeue budget
    h = runner.run(s)
    assert [j["status"] for j in h.jobs] == ["done"] * 3, (h.jobs, h.notes)
    assert h.ended_by == "quiescent"
    exits = {x.worker: x for x in h.exits}
    # each ran one job and stopped; each was replaced by the next generation, which ran the next job
    for worker in ("w1.0", "w1.1", "w1.2"):
        x = exits[worker]
        assert (x.outcome, x.by_harness, x.code) == (WorkerExitReason.STOPPED_BY_ITSELF, False, 79), x
        assert x.detail == own_stops.said(1) and x.last_warning is None, x
        assert _reasons(h)[worker] == "stopped-by-itself"
        assert f"{worker} stopped by itself: {own_stops.said(1)}; replaced" in h.notes, h.notes
    # a replacement of the last may have started, found nothing left, and been ended by the run's end
    assert all(x.by_harness for w, x in exits.items() if w not in ("w1.0", "w1.1", "w1.2")), exits
    assert [e.worker for e in sorted(h.executions(), key=lambda e: e.job)] == ["w1.0", "w1.1", "w1.2"]
    assert f"process ended: stopped by itself: {own_stops.said(1)}" in timeline(h)
    results = check(h)
    assert results["progress"].status == HELD and results["terminal-states"].status == HELD


def test_the_same_worker_run_to_its_budget_is_recorded_budget_and_not_replaced(runner):
    s = Schedule(jobs=tuple(JobSpec(i, tenant=i) for i in range(1, 5)), workers=2, design=DESIGN,
                 dequeues=2, time_scale=SCALE)
    h = runner.run(s)
    assert [j["status"] for j in h.jobs] == ["done"] * 4, (h.jobs, h.notes)
    assert sorted((x.worker, x.outcome, x.by_harness, x.detail) for x in h.exits) == [
        ("w1.0", WorkerExitReason.BUDGET, False, None), ("w2.0", WorkerExitReason.BUDGET, False, None)]
    assert _reasons(h) == {"w1.0": "budget", "w2.0": "budget"}
    assert not any("stopped by itself" in n for n in h.notes), h.notes
