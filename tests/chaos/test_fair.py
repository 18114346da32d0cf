"""lease-round-robin's hazard, measured: a worker stopped between its claim and the claim's commit
holds the turn row, and every other worker's claim waits for it; lease's claims do not."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule

pytestmark = pytest.mark.chaos

SCALE = 0.5
PAUSE = 2.0  # article seconds: 1 s here


def _longest_gap(design: str, point: str, runner) -> float:
    """The longest time, in the run's seconds, in which no execution started anywhere."""
    jobs = tuple(JobSpec(i, tenant=(i % 5) + 1, duration=0.05) for i in range(1, 21))
    h = runner.run(Schedule(jobs=jobs, workers=2, design=design, time_scale=SCALE,
                            events=(Event("pause", job=3, point=point, duration=PAUSE),)))
    assert [j["status"] for j in h.jobs] == ["done"] * len(jobs)
    starts = sorted(e.start for e in h.executions())
    return max(b - a for a, b in zip(starts, starts[1:], strict=False))


def test_a_paused_claim_stops_every_round_robin_claim_but_not_a_fifo_one(runner):
    pause = PAUSE * SCALE
    rr = _longest_gap("lease-round-robin", "sql:commit:fair.claim_round_robin", runner)
    fifo = _longest_gap("lease", "sql:commit:lease.claim", runner)
    assert rr > 0.8 * pause, rr  # the other worker waited on the turn row the whole pause
    assert fifo < 0.5 * pause, fifo  # the other worker went on claiming
