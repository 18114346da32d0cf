"""The per-statement work a worker repeats is kept, and keeping it changes no answer (issue 36 item 5)."""

from __future__ import annotations

from pg_job_chaos.core import setting_sql
from pg_job_chaos.core.sqlfile import NAMES
from pg_job_chaos.workers.body import statements
from pg_job_chaos.workers.tenant import track as tenant_track

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


def test_a_composed_statement_of_literals_is_judged_by_its_template():
    """The body's inherited-tenant read has a new literal per execution: judged once, by its template,
    when no literal's value could make it change the setting -- and rendered when one could."""
    from psycopg import sql

    other = sql.SQL("select set_config('pgjc.last', {}, false)").format(sql.Literal("w1.0 5 1"))
    ours = sql.SQL("select set_config('app.tenant', {}, false)").format(sql.Literal("5"))
    named = sql.SQL("select set_config({}, '5', false)").format(sql.Literal("app.tenant"))
    split = sql.SQL("select set_config('pgjc.last', {}, false)").format(sql.Literal("a;b"))
    ident = sql.SQL("set {} to '5'").format(sql.Identifier("app.tenant"))
    assert tenant_track.literals_only(other) and tenant_track.literals_only(ours)
    assert tenant_track.literals_only(named)
    assert not tenant_track.literals_only(split) and not tenant_track.literals_only(ident)
    assert not tenant_track.literals_only("select 1")
    for q in (other, ours, named):  # empty for the template exactly when empty for the rendering
        template = setting_sql.changes(statements._text(q), "app.tenant", None)
        rendered = setting_sql.changes(q.as_string(None), "app.tenant", None)
        assert (template == []) == (rendered == []), q
    assert setting_sql.changes(statements._text(other), "app.tenant", None) == []
