"""Detection power: planted bugs the suite has never been tuned to, each found by the property that
names it, within the default budget (the small-scope pass, then 10 examples), at the suite's scale.
Each hunt stops at the named property's first violation (``stop_at_first``, gated on it) and shrinks
it: what is asserted is that the budget finds it, not what the rest of the budget costs (``python run.py
bench`` runs every planted bug's whole search and prints the seconds and runs to the first find).
And one false-alarm check: the recommended design under its faults violates exactly what it must."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule, Timing
from pg_job_chaos.faults import parse_faults
from pg_job_chaos.harness.bench import planted
from pg_job_chaos.harness.engine.search import search
from pg_job_chaos.harness.engine.smallscope import dequeue_budget
from pg_job_chaos.properties import check
from pg_job_chaos.workers import load_design
from tests.conftest import parallel_options

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

SCALE = 0.2
# The stale sweep is found by the default search too (python run.py bench: 29 s to the first
# counterexample, 90 runs in 89 s), too long for the suite: here its one small-scope case runs alone
# (test_a_sweep_that_writes_back_stale_rows_undoes_a_success).
BENCH_ONLY = {"SweepWritesBackStale"}
CASES = [c for c in planted.CASES if c[0] not in BENCH_ONLY]


@pytest.mark.parametrize(("bug", "faults", "prop"), CASES, ids=[c[0] for c in CASES])
def test_planted_bug_is_found(runner, bug, faults, prop):
    # HeartbeatAnyAttempt's schedule is met only while Hypothesis shrinks another property's violation
    # (below): its hunt keeps the whole gate and the whole budget.
    hunt = {} if bug == "HeartbeatAnyAttempt" else {"gate": (prop,), "stop_at_first": True}
    out = search(runner.run, faults=parse_faults(faults), design=load_design(planted.spec(bug)),
                 tenant_mode="local", examples=10, seed=1, time_scale=SCALE, **hunt,
                 **parallel_options(runner))
    r = out.aggregate()
    assert r[prop].status == "violated", {n: x.evidence for n, x in r.items()}
    smallest = out.smallest_for(prop)
    if bug == "HeartbeatAnyAttempt":
        # Found only by a random schedule (a pause on a job long enough for the heartbeat to matter):
        # with seed 1 the shrinker spends its budget (SHRINK_RUNS) at 10 jobs; seeds 2 and 3 reach 1.
        assert len(smallest.schedule.jobs) <= 2 or out.shrink_budget_spent, smallest.schedule.to_json()
    else:
        assert len(smallest.schedule.jobs) <= 2, smallest.schedule.to_json()
    if bug == "RaiseLimitOnRetry":
        assert "raised from 3 to" in r[prop].evidence


def test_a_sweep_that_writes_back_stale_rows_undoes_a_success(runner):
    """The last-attempt case that finds it: a crash spends two executions, the sweep stops between its
    read and its write for every attempt's lease; it wakes after the last attempt finished and writes
    ``queued`` back over ``done``. The design it derives from holds on the same schedule."""
    events = (Event("pause", None, point="sql:planted.sweep_write_back", duration=2.0 * 3),)
    schedule = Schedule(jobs=(JobSpec(1, fault="crash", strikes=2),), workers=3, events=events,
                        design=planted.spec("SweepWritesBackStale"), time_scale=SCALE, max_attempts=3,
                        dequeues=dequeue_budget(1, 3), timing=Timing(deadline=60.0))
    r = check(runner.run(schedule))["success-final"]
    assert r.status == "violated", r.evidence
    assert "done -> queued" in r.evidence and "update" in r.evidence, r.evidence
    fine = check(runner.run(schedule.replace(design="lease-heartbeat")))["success-final"]
    assert fine.status == "held", fine.evidence


def test_raise_limit_is_found_by_the_small_scope_pass(runner):
    out = search(runner.run, faults=parse_faults("raise"),
                 design=load_design(planted.spec("RaiseLimitOnRetry")),
                 tenant_mode="local", examples=1, seed=1, time_scale=SCALE, gate=("bounded-attempts",),
                 stop_at_first=True, **parallel_options(runner))
    # its property's first violation (a fault-free run may lose a timing property on a busy machine)
    first = next(r for r in out.runs if "bounded-attempts" in r.violated)
    assert first.label.startswith("raise at"), first.label  # found before any random schedule ran
