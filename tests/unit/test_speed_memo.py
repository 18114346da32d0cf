"""The per-statement work a worker repeats is kept, and keeping it changes no answer (issue 36 item 5)."""

from __future__ import annotations

from pg_job_chaos.core import setting_sql
from pg_job_chaos.core.sqlfile import NAMES
from pg_job_chaos.workers import statements

SET = "select set_config('app.tenant', %(tenant)s, %(local)s);"


def test_kept_changes_are_the_parsed_ones_and_a_caller_cannot_spoil_them():
    params = {"tenant": "5", "local": True}
    first = setting_sql.changes(SET, "app.tenant", params)
    assert first == setting_sql._changes(SET, "app.tenant", params) == [("local", "5")]
    first.append(("session", "spoilt"))  # the caller's list, not the kept one
    assert setting_sql.changes(SET, "app.tenant", params) == [("local", "5")]


def test_true_and_one_are_kept_apart():
    """Equal and hashed alike in Python, but only True is a boolean to set_config's third argument."""
    assert setting_sql.changes(SET, "app.tenant", {"tenant": "5", "local": True}) == [("local", "5")]
    assert setting_sql.changes(SET, "app.tenant", {"tenant": "5", "local": 1})[0][0] == "unknown"


def test_unhashable_parameters_are_parsed_every_time():
    assert setting_sql._memo_key(SET, "app.tenant", {"tenant": ["5"], "local": True}) is None
    assert setting_sql.changes(SET, "app.tenant", {"tenant": "5", "local": True}) == [("local", "5")]


def test_a_name_registered_later_renames_a_statement_seen_before():
    text = "select 4242 as speed_memo_probe"
    before = statements.name_of(text)
    assert before is not None and before.startswith("sql:") and before != "sql:probe.speed"
    NAMES.setdefault(text, "probe.speed")
    try:
        assert statements.name_of(text) == "sql:probe.speed"
    finally:
        NAMES.pop(text, None)
