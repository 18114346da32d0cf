"""The fair claims under faults. lease-round-robin's hazard, measured: a worker stopped between its claim
and the claim's commit holds the turn row, and every other worker's claim waits for it; lease's claims
do not. lease-tenant-cap: a crash inside its three-statement claim undoes it."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule

pytestmark = pytest.mark.chaos

SCALE = 0.5
PAUSE = 2.0  # article seconds: 1 s here


def _started_by_others_while_paused(design: str, point: str, runner) -> int:
    """Executions the other worker started while the paused one was stopped (the supervisor's pause to
    its resume, on the history's clock)."""
    jobs = tuple(JobSpec(i, tenant=(i % 5) + 1, duration=0.05) for i in range(1, 21))
    h = runner.run(Schedule(jobs=jobs, workers=2, design=design, time_scale=SCALE,
                            events=(Event("pause", job=3, point=point, duration=PAUSE),)))
    assert [j["status"] for j in h.jobs] == ["done"] * len(jobs)
    pause = next(x for x in h.injected if x["fault"] == "pause")
    resume = next(x for x in h.injected if x["fault"] == "resume")
    return sum(1 for e in h.executions()
               if e.worker != pause["worker"] and pause["t"] < e.start < resume["t"])


def test_a_paused_claim_stops_every_round_robin_claim_but_not_a_fifo_one(runner):
    rr = _started_by_others_while_paused("lease-round-robin", "sql:commit:fair.claim_round_robin", runner)
    fifo = _started_by_others_while_paused("lease", "sql:commit:lease.claim", runner)
    assert rr <= 1, rr  # at most a job it had claimed before: then it waited on the turn row
    assert fifo >= 3, fifo  # the other worker went on claiming (about 15 of the 20 jobs in that second)


@pytest.mark.parametrize("point", ["sql:fair.cap_lock:after", "sql:commit:fair.cap_claim"])
def test_a_crash_inside_the_capped_claim_undoes_it(runner, point):
    # The card's one-job schedules never reach these points (a statement point is bound to the job the
    # worker ran last, and after a single job the queue is empty before the lock): job 1 runs first, the
    # claim after it dies holding tenant 1's lock (and, at the commit, job 2), and the restarted worker
    # claims tenant 1 again.
    jobs = (JobSpec(1, tenant=1, fault="crash", point=point), JobSpec(2, tenant=1), JobSpec(3, tenant=2))
    h = runner.run(Schedule(jobs=jobs, workers=1, design="lease-tenant-cap", time_scale=SCALE))
    assert sum(1 for x in h.exits if x.outcome == "exit 1") == 1, h.exits  # the crash struck once
    assert [j["status"] for j in h.jobs] == ["done"] * 3
    # the claim the crash cut never committed: the job it took was claimed once, by the new worker
    assert {j["id"]: j["attempts"] for j in h.jobs} == {1: 1, 2: 1, 3: 1}
