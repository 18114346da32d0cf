"""Transient faults (JobSpec.strikes): the schedule field, and transient-recovers (no database)."""

from __future__ import annotations

import json

import pytest

from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.properties import HELD, UNKNOWN, VIOLATED
from tests.unit.test_properties import execution, job, one, run_row, sane, schedule


def transient(strikes=1, *, events=(), max_attempts=3) -> dict:
    s = schedule((1,), faults={1: "raise"}, events=events, max_attempts=max_attempts)
    s["jobs"][0]["strikes"] = strikes
    return s


def test_strikes_is_saved_only_when_given_and_old_files_load():
    plain = Schedule(jobs=(JobSpec(1, fault="raise"),))
    assert "strikes" not in plain.to_dict()["jobs"][0]  # a fault on every execution: files as before
    once = Schedule(jobs=(JobSpec(1, fault="raise", strikes=1),))
    assert once.to_dict()["jobs"][0]["strikes"] == 1
    assert Schedule.from_dict(json.loads(once.to_json())) == once
    assert Schedule.from_dict(json.loads(plain.to_json())) == plain


@pytest.mark.parametrize(("spec", "message"), [
    ({"id": 1, "fault": "raise", "strikes": 0}, "jobs[0].strikes: at least 1, and only with a fault"),
    ({"id": 1, "strikes": 1}, "jobs[0].strikes: at least 1, and only with a fault"),
    ({"id": 1, "fault": "raise", "strikes": "once"}, "field jobs[0].strikes: expected int"),
])
def test_a_bad_strikes_field_is_named(spec, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Schedule.from_dict({"jobs": [spec]})


def test_a_design_that_never_retries_a_transient_failure_is_found():
    h = sane(sched=transient(1), records=execution("w1.0", 1, 1, 1.0, 2.0, outcome="failed", error="boom"),
             jobs=[job(1, "dead")], runs=[])
    result = one("transient-recovers", h)
    assert (result.status, result.jobs) == (VIOLATED, (1,))
    assert result.evidence == ("job 1's raise struck only its first 1 execution of 3 attempts, yet it ended "
                               "dead after 1 execution: the design never retried it")


def test_a_retried_transient_failure_holds_and_other_schedules_are_vacuous():
    h = sane(sched=transient(1), records=[*execution("w1.0", 1, 1, 1.0, 2.0, outcome="failed", error="boom"),
                                          *execution("w1.0", 1, 2, 2.1, 3.0)],
             jobs=[job(1, attempts=2)], runs=[run_row(1, 2)])
    assert one("transient-recovers", h).status == HELD
    assert one("transient-recovers", sane()).evidence.startswith("vacuous: no job's fault was transient")
    # As many strikes as attempts is a fault on every execution: nothing to recover from.
    assert one("transient-recovers", sane(sched=transient(3), jobs=[job(1, "dead")])).status == HELD


def test_a_job_a_supervisor_fault_aims_at_is_not_judged_and_a_run_cut_short_cannot_decide():
    aimed = sane(sched=transient(1, events=[("kill", 1)]), jobs=[job(1, "dead")], runs=[])
    assert one("transient-recovers", aimed).evidence.startswith("vacuous")
    cut = sane(sched=transient(1), jobs=[job(1, "queued")], runs=[], ended_by="deadline")
    assert one("transient-recovers", cut).status == UNKNOWN


def test_retry_gaps_are_in_leases_from_the_failure_to_the_next_execution():
    from pg_job_chaos.core.coverage import retry_gaps
    from pg_job_chaos.harness.report.text import retry_line

    sched = transient(1)
    sched["time_scale"], sched["timing"]["lease"] = 0.5, 1.0  # a lease is 0.5 s of real time
    h = sane(sched=sched, records=[*execution("w1.0", 1, 1, 1.0, 2.0, outcome="failed", error="boom"),
                                   *execution("w1.0", 1, 2, 2.05, 3.0), *execution("w1.0", 2, 1, 3.1, 3.5)])
    assert [round(g, 3) for g in retry_gaps(h)] == [0.1]  # one retry, 0.05 s = 0.1 lease; job 2 none
    assert retry_line({"retries": 1, "min": 0.1, "median": 0.1, "max": 0.1}) == [
        "retries (a figure, not a verdict): 1 came back 0.1-0.1 leases after the failure, median 0.1"]
    assert retry_line({}) == []


def test_a_transient_crash_kills_at_most_its_strikes():
    from tests.unit.test_properties import died

    sched = schedule((1,), faults={1: "crash"})
    sched["jobs"][0]["strikes"] = 1
    h = sane(sched=sched, records=[*execution("w1.0", 1, 1, 1.0, None), *execution("w1.1", 1, 2, 2.0, None)],
             jobs=[job(1, "dead", attempts=2)], runs=[],
             exits=[died("w1.0", 1, t=1.5), died("w1.1", 1, t=2.5)])
    result = one("bounded-blast-radius", h)
    assert (result.status, result.evidence) == (VIOLATED, "job 1 killed 2 worker processes "
                                                          "(its transient fault strikes only 1 execution)")
