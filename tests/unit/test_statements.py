"""Statement strike points (workers/body/statements.py): names, schedules, small scope, strategies """ \
    """(no database)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from psycopg import sql

from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.schedule import Schedule
from pg_job_chaos.faults import parse_faults
from pg_job_chaos.harness.engine import smallscope
from pg_job_chaos.properties.strategies import schedules
from pg_job_chaos.workers.body import statements
from pg_job_chaos.workers.builtin import lease


def test_a_statement_of_a_sql_file_is_named_by_its_file_and_name():
    assert statements.name_of(lease.Q.claim) == "sql:lease.claim"
    assert statements.name_of(" ".join(lease.Q.claim.split())) == "sql:lease.claim"  # whitespace aside


def test_any_other_statement_gets_a_stable_digest_and_literals_do_not_change_it():
    a = statements.name_of(sql.SQL("update t set x = {} where id = {}").format(sql.Literal(1),
                                                                               sql.Literal(2)))
    b = statements.name_of(sql.SQL("update t set x = {} where id = {}").format(sql.Literal(7),
                                                                               sql.Literal(9)))
    assert a == b and a.startswith("sql:") and len(a) == len("sql:") + 8
    assert statements.name_of("select 1") != statements.name_of("select 2")
    assert statements.name_of("BEGIN") is None and statements.name_of("select clock_timestamp()") is None


def test_an_event_may_name_no_job_only_at_a_statement_point():
    data = {"jobs": [{"id": 1}], "events": [{"fault": "pause", "job": None, "point": "sql:lease.sweep"}]}
    assert Schedule.from_dict(data).events[0].job is None
    data["events"][0]["point"] = "mid-work"
    with pytest.raises(UsageError, match="only a statement point"):
        Schedule.from_dict(data)
    data["events"][0].update(point="sql:", job=1)
    with pytest.raises(UsageError, match="unknown point 'sql:'"):
        Schedule.from_dict(data)


def test_the_small_scope_strikes_each_statement_with_each_fault_that_strikes_there_within_the_cap():
    seen = [("sql:lease.claim", False), ("sql:lease.finish", True)] + [(f"sql:s{i}", True) for i in range(20)]
    cases = smallscope.statement_schedules(seen, faults=parse_faults("pause,crash,kill"), design="lease",
                                           tenant_mode="local", time_scale=0.2)
    assert len(cases) == smallscope.STATEMENT_CAP  # pause (at_statements); kill is drawn, crash a job fault
    label, first = cases[0]
    assert label == "pause at sql:lease.claim (no job); one job, three workers"
    assert (first.workers, first.events[0].job, len(first.jobs), first.jobs[0].duration) == (3, None, 1, 0.05)
    assert cases[1][1].events[0].job == 1  # a statement of a job's


def test_a_job_less_statement_is_struck_whatever_the_runs_showed_first():
    """A heartbeat's or a finish's statements may be seen first and fill the cap (timing); the
    statements a worker sends before it has a job -- the two halves of a read-then-write claim --
    are struck all the same, before any of a job's."""
    seen = [(f"sql:job{i}", True) for i in range(smallscope.STATEMENT_CAP)] + [
        ("sql:planted.claim_pick", False), ("sql:job0", True), ("sql:planted.claim_by_id", False)]
    ranked = smallscope.ranked(seen)
    assert ranked[:2] == [("sql:planted.claim_pick", False), ("sql:planted.claim_by_id", False)]
    assert len(ranked) == smallscope.STATEMENT_CAP and ranked[2:] == seen[:smallscope.STATEMENT_CAP - 2]
    labels = [label for label, _ in smallscope.statement_schedules(
        seen, faults=parse_faults("pause"), design="lease", tenant_mode="local", time_scale=0.2)]
    assert labels[1] == "pause at sql:planted.claim_by_id (no job); one job, three workers"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(schedules(faults=parse_faults("pause"), design="lease", statements=(("sql:lease.sweep", False),)))
def test_drawn_events_at_a_statement_of_no_job_name_none(s):
    for e in s.events:
        assert (e.job is None) == (e.point == "sql:lease.sweep")
    Schedule.from_dict(s.to_dict() | {"jobs": [j.__dict__ for j in s.jobs],
                                      "events": [e.__dict__ for e in s.events]})


def test_a_worker_starts_with_no_job_whatever_its_parent_ran():
    """A forked worker inherits the parent's thread-local: install forgets a job the parent ran in-process."""
    statements.set_current(object())
    previous = statements._ctx
    try:
        statements.install(previous)
        assert statements.current() is None
    finally:
        statements._ctx = previous


def test_the_body_files_exist():
    """A statement sent from the body's own files is the body's, not the design's: every name in
    BODY_FILES must be a file of the workers layer (a moved file would leave its statements unnamed)."""
    from pathlib import Path

    from pg_job_chaos.workers.body import statements

    root = Path(statements.__file__).resolve().parents[2]
    assert all((root / name).is_file() for name in statements.BODY_FILES), statements.BODY_FILES


def test_the_body_statements_keep_the_names_saved_schedules_use():
    """A point is named after its SQL file's stem: the body's file moved (workers/body/) but kept its
    name, so ``sql:commit:body.finish_run:after`` in a saved schedule still names the same statement."""
    from pg_job_chaos.core.sqlfile import NAMES, normalized
    from pg_job_chaos.workers.body import execution

    assert NAMES[normalized(execution.Q.finish_run)] == "body.finish_run"
    assert NAMES[normalized(execution.Q.insert_finished_run)] == "body.insert_finished_run"
