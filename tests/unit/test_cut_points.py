"""Issue 36 item 1: the faults that end or cut a worker strike at every statement point -- before a
statement, after its reply, before and after a COMMIT -- and schedule format 3 names those points;
format 1 and 2 files load as before (no database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from pg_job_chaos.core import schedule as base
from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.schedule import Schedule, is_before_statement, is_statement_point
from pg_job_chaos.faults import CATALOGUE, parse_faults
from pg_job_chaos.harness.engine import schedules as files
from pg_job_chaos.harness.engine import smallscope
from pg_job_chaos.properties.strategies import schedules

ROOT = Path(__file__).resolve().parents[2]
SAVED = ROOT / "docs" / "findings" / "libraries" / "schedules"


def test_the_new_point_names():
    assert base.FORMAT == 4  # 4: the deploy fault and timing.grace (tests/unit/test_deploy_schedule.py)
    for p in ("sql:lease.finish", "sql:lease.finish:after", "sql:commit", "sql:commit:after",
              "sql:commit:body.insert_finished_run", "sql:commit:body.insert_finished_run:after"):
        assert is_statement_point(p), p
    assert not is_statement_point("sql:") and not is_statement_point("mid-work")
    assert is_before_statement("sql:lease.finish") and is_before_statement("sql:3f9a1c2e")
    assert not any(is_before_statement(p) for p in ("sql:lease.finish:after", "sql:commit",
                                                    "sql:commit:lease.claim", "sql:commit:lease.claim:after"))
    assert sorted(n for n, f in CATALOGUE.items() if f.cuts_worker) == [
        "crash", "kill", "lost-commit-reply", "reset", "terminate"]


def test_a_crash_may_name_a_statement_point_and_only_a_fault_that_ends_the_worker():
    data = {"jobs": [{"id": 1, "fault": "crash", "point": "sql:commit:lease.finish:after"}]}
    s = Schedule.from_dict(data, validators=files.VALIDATORS)
    assert s.jobs[0].point == "sql:commit:lease.finish:after"
    data["jobs"][0]["fault"] = "raise"
    with pytest.raises(UsageError, match="strikes only at the body's points; at a statement point: crash"):
        Schedule.from_dict(data, validators=files.VALIDATORS)


# the schedules the findings saved before format 3 (a later one is saved in the current format)
FORMAT_2 = sorted(p for p in SAVED.glob("*.json") if json.loads(p.read_text()).get("format") == 2)


def test_the_findings_keep_format_2_schedules_to_replay():
    assert len(FORMAT_2) >= 7, FORMAT_2


@pytest.mark.parametrize("path", FORMAT_2, ids=lambda p: p.name)
def test_a_saved_format_2_schedule_loads_and_saves_unchanged_but_for_its_format(path):
    data = json.loads(path.read_text())
    assert data["format"] == 2
    s = files.load(path)
    again = json.loads(s.to_json())
    assert again.pop("format") == 4
    data.pop("format")
    assert again["timing"].pop("grace") is None  # format 4's one new field: the default grace
    assert {k: again[k] for k in data} == data  # every point, event and job as saved


def test_a_format_1_schedule_loads(tmp_path):
    f = tmp_path / "old.json"
    f.write_text(json.dumps({"format": 1, "jobs": [{"id": 1, "fault": "crash", "point": "mid-work"}],
                             "events": [{"fault": "kill", "job": 1, "point": "after-effect"}]}))
    s = files.load(f)
    assert (s.jobs[0].point, s.events[0].point, s.events[0].job) == ("mid-work", "after-effect", 1)


SEEN = [("sql:lease.claim", False), ("sql:lease.claim:after", False), ("sql:commit:lease.claim", False),
        ("sql:lease.finish", True), ("sql:lease.finish:after", True), ("sql:commit:body.finish_run", True),
        ("sql:commit:body.finish_run:after", True), ("sql:commit:lease.claim:after", False)]


def test_the_pause_strikes_only_before_a_statement_as_before():
    assert smallscope.ranked(SEEN) == [("sql:lease.claim", False), ("sql:lease.finish", True)]


def test_a_jobs_points_come_first_after_a_commit_first():
    assert smallscope.cut_points(SEEN) == [
        ("sql:commit:body.finish_run:after", True), ("sql:lease.finish:after", True),
        ("sql:commit:body.finish_run", True), ("sql:lease.finish", True),
        ("sql:commit:lease.claim:after", False), ("sql:lease.claim:after", False),
        ("sql:commit:lease.claim", False), ("sql:lease.claim", False)]


def test_the_cut_schedules_one_job_one_and_two_workers_within_the_cap():
    cases = smallscope.cut_schedules(SEEN, faults=parse_faults("crash,overrun"), design="lease",
                                     tenant_mode="local", time_scale=0.2)
    assert len(cases) == 8  # crash: the job's 4 points, one worker and two; a job fault has no job-less point
    label, s = cases[0]
    assert label == "crash at sql:commit:body.finish_run:after; one job, 1 worker"
    assert (s.jobs[0].fault, s.jobs[0].point, s.jobs[0].strikes, s.workers, s.events) == (
        "crash", "sql:commit:body.finish_run:after", 1, 1, ())
    assert cases[1][1].workers == 2
    cases = smallscope.cut_schedules(SEEN, faults=parse_faults("kill,terminate,reset,pause"), design="lease",
                                     tenant_mode="local", time_scale=0.2)
    assert len(cases) == smallscope.CUT_RUNS  # 3 faults x 8 points x 2 shapes = 48, cut at the stated cap
    assert {c[1].events[0].fault for c in cases} == {"kill", "terminate", "reset"}  # never pause
    assert cases[-1][1].events[0].job is None  # the job-less points come last
    shown = []
    assert smallscope.cut_schedules([], faults=parse_faults("kill"), design="x", tenant_mode="local",
                                    time_scale=0.2, progress=shown.append) == []
    assert "strike only at the body's points" in shown[0]


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(schedules(faults=parse_faults("crash,kill,pause"), design="lease", statements=smallscope.ranked(SEEN),
                 cut_statements=tuple(smallscope.cut_points(SEEN))))
def test_the_generator_draws_the_new_points_for_the_faults_that_cut_only(s):
    for j in s.jobs:
        if j.point is not None and is_statement_point(j.point):
            assert j.fault == "crash" and (j.point, True) in SEEN
    for e in s.events:
        if e.fault == "pause" and is_statement_point(e.point):
            assert is_before_statement(e.point)
        if is_statement_point(e.point):
            assert (e.job is None) == ((e.point, False) in SEEN)
    Schedule.from_dict(json.loads(s.to_json()), validators=files.VALIDATORS)


@pytest.mark.parametrize("fmt", [5, 0, "3", 2.5, True])
def test_a_format_this_version_cannot_read_is_refused_naming_the_field(tmp_path, fmt):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"format": fmt, "jobs": [{"id": 1}]}))
    with pytest.raises(UsageError, match=r"field format: .*reads formats 1 to 4") as e:
        files.load(f)
    assert ("newer pg-job-chaos" in str(e.value)) == (fmt == 5)
