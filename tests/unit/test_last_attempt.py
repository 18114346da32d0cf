"""The small-scope schedules that spend a job's attempts before the strike (issue 36, item 3): no database."""

from __future__ import annotations

from pg_job_chaos.core.schedule import JOB_POINTS, JobSpec, Schedule
from pg_job_chaos.faults import parse_faults
from pg_job_chaos.harness.engine import smallscope

SEEN = [("sql:lease.claim", False), ("sql:planted.sweep_read", False), ("sql:lease.finish", True),
        ("sql:planted.sweep_write_back", False)]


def cases(faults: str, max_attempts: int = 3):
    return smallscope.last_attempt_schedules(SEEN, faults=parse_faults(faults), design="lease",
                                             tenant_mode="local", time_scale=0.2, max_attempts=max_attempts)


def test_the_card_faults_add_one_schedule_crash_spends_the_attempts():
    out = cases("crash,overrun")  # overrun finishes late: it spends no attempt by itself
    assert [label for label, _ in out] == [
        "crash on 2 executions, the last runs clean; one job, three workers, its attempts spent"]
    s = out[0][1]
    assert (s.jobs[0].fault, s.jobs[0].strikes, s.events, s.workers) == ("crash", 2, (), 3)
    assert s.dequeues is not None and s.dequeues >= s.max_attempts  # one worker may run every attempt


def test_a_supervisor_fault_strikes_the_last_execution_and_between_a_sweep_s_statements():
    out = dict(cases("raise,pause"))
    at = {e.point: e for label, s in out.items() for e in s.events if "pause at" in label}
    # raise ends an execution at mid-work: later points' first occurrence is the last execution's
    assert {p: at[p].occurrence for p in JOB_POINTS} == {
        "before-tenant": 3, "after-insert": 3, "mid-work": 3, "after-effect": 1, "before-finish": 1}
    # the job-less statements only, each stopped long enough for every attempt's lease to expire in turn
    sweep = at["sql:planted.sweep_write_back"]
    assert (sweep.job, sweep.duration) == (None, 6.0) and "sql:lease.finish" not in at
    assert len(out) == 1 + len(JOB_POINTS) + 3
    for s in out.values():  # each a valid schedule (what a saved counterexample replays)
        Schedule.from_dict(s.to_dict() | {"jobs": [j.__dict__ for j in s.jobs],
                                          "events": [e.__dict__ for e in s.events]})


def test_nothing_to_spend_without_a_job_fault_that_ends_an_execution_or_a_second_attempt():
    assert cases("pause,overrun") == [] and cases("crash", max_attempts=1) == []


def test_the_generator_may_let_a_transient_fault_spend_the_attempts_before_an_event():
    from hypothesis import HealthCheck, find, settings

    from pg_job_chaos.properties import strategies
    from pg_job_chaos.properties.strategies import schedules

    jobs = [JobSpec(1, fault="crash", strikes=2), JobSpec(2), JobSpec(3, fault="overrun", strikes=1)]
    yes, no = (lambda strategy, label=None: True), (lambda strategy, label=None: False)
    assert strategies._spent(no, jobs, 1, "mid-work") == 0  # the simplest: strike the first occurrence
    assert strategies._spent(yes, jobs, 1, "mid-work") == 2  # crashed at mid-work twice: the 3rd passes
    assert strategies._spent(yes, jobs, 1, "before-finish") == 0  # no crashed execution got that far
    assert strategies._spent(yes, jobs, 3, "before-finish") == 1  # an overrun passes every point
    assert strategies._spent(yes, jobs, 2, "mid-work") == 0  # no transient fault: nothing drawn
    # and Hypothesis reaches it: an event on the last attempt of a job whose fault spent the others
    # (derandomized: whether 2000 random draws reach it is chance; a fixed seed makes it one answer)
    found = find(schedules(faults=parse_faults("crash,kill"), design="lease", max_attempts=3),
                 lambda s: len(s.events) == 1 and s.events[0].job is not None and s.events[0].occurrence == 3,
                 settings=settings(max_examples=2000, database=None, derandomize=True,
                                   suppress_health_check=list(HealthCheck)))
    assert found.jobs[found.events[0].job - 1].strikes == 2
