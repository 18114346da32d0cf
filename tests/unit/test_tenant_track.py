"""The tenant setting's tracking, pure half (workers/tenant/track.py): what each statement form does to
the setting, and the per-connection state machine over transaction ends and savepoints. The half that
sends SQL is tests/integration/test_tenant_track.py (against the real server, every form compared with
current_setting); the judging is in test_properties.py."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.statement_tenants import StatementTenant
from pg_job_chaos.workers.tenant import track as tenant_track
from pg_job_chaos.workers.tenant.track import UNKNOWN, UNSET, State, changes

NAME = "app.tenant"


FORMS = [
    ("select set_config('app.tenant', '3', false)", None, [("session", "3")]),
    ("select set_config('app.tenant', '3', true)", None, [("local", "3")]),
    ("select set_config('app.tenant', %s, false)", ["4"], [("session", "4")]),
    ("select set_config('app.tenant', %(tenant)s, %(local)s)", {"tenant": "5", "local": True},
     [("local", "5")]),
    ("select set_config(%s, %s, %s)", ["app.tenant", 6, False], [("session", "6")]),
    ("select %s, set_config('app.tenant', %s::text, false)", [9, "7"], [("session", "7")]),
    ("SELECT SET_CONFIG('APP.TENANT', 'X', 'f')", None, [("session", "X")]),
    ("select set_config('app.tenant', null, false)", None, [("session", UNSET)]),
    ("select set_config('app.other', '1', false)", None, []),
    ("select set_config(%s, '1', false)", ["app.other"], []),
    ("set app.tenant = '8'", None, [("session", "8")]),
    ("SET SESSION app.tenant TO 'Mixed'", None, [("session", "Mixed")]),
    ("set local app.tenant to 9", None, [("local", "9")]),
    ("set app.tenant to default", None, [("session", UNSET)]),
    ("RESET app.tenant", None, [("session", UNSET)]),
    ("reset all", None, [("session", UNSET)]),
    ("DISCARD ALL", None, [("session", UNSET)]),
    ("discard plans", None, []),
    ("reset role", None, []),
    ("set statement_timeout = 0", None, []),
    ("alter role x set app.tenant = '1'", None, []),  # later sessions', not this one's
    ("select current_setting('app.tenant', true)", None, []),
    ("select count(*) from documents", None, []),
]


@pytest.mark.parametrize(("text", "params", "want"), FORMS)
def test_every_form_that_sets_or_resets_it(text, params, want):
    assert changes(text, NAME, params) == want


@pytest.mark.parametrize("text", [
    "select set_config('app.tenant', (select max(id)::text from tenants), false)",
    "select set_config('app.tenant', current_user, false)",
])
def test_a_computed_value_is_unknown(text):
    assert changes(text, NAME) == [("session", UNKNOWN)]


def test_a_computed_name_or_scope_is_unknown():
    assert changes("select set_config(lower('APP.TENANT'), '1', false)", NAME) == [("unknown", UNKNOWN)]
    assert changes("select set_config('app.tenant', '1', now() > now())", NAME) == [("unknown", UNKNOWN)]
    assert changes("select set_config('app.tenant', %s, %s)", NAME, ["1"]) == [("unknown", UNKNOWN)]


def test_transaction_commands_and_several_statements():
    assert changes("commit", NAME) == [("end", "commit")]
    assert changes("ROLLBACK", NAME) == [("end", "rollback")]
    assert changes('ROLLBACK TO SAVEPOINT "_pg3_1"', NAME) == [("rollback-to", "_pg3_1")]
    assert changes('SAVEPOINT "_pg3_1"', NAME) == [("savepoint", "_pg3_1")]
    assert changes('RELEASE "_pg3_1"', NAME) == [("release", "_pg3_1")]
    assert changes("begin; set local app.tenant = '2'; select 1; commit", NAME) == [
        ("local", "2"), ("end", "commit")]
    assert changes("begin", NAME) == []


def test_the_cheap_test_lets_through_what_may_change_it():
    for text in ("select set_config('app.tenant', '1', false)", "select set_config(%s, %s, %s)", "RESET ALL",
                 "discard all", "commit", "rollback to x", "savepoint x", "release x", "end"):
        assert tenant_track.mentions(text, NAME), text
    assert not tenant_track.mentions("select count(*) from documents where id = 1", NAME)


def test_session_and_local_changes_over_commit_and_rollback():
    st = State()
    st.change("session", "1", in_block=True)
    assert st.value() == "1"
    st.end(committed=False)
    assert st.value() == UNSET  # a session SET in a transaction that rolls back reverts
    st.change("session", "1", in_block=True)
    st.end(committed=True)
    assert st.value() == "1"
    st.change("local", "2", in_block=True)
    assert st.value() == "2"
    st.end(committed=True)
    assert st.value() == "1"  # a local one ends with its transaction, whichever way
    st.change("local", "3", in_block=False)
    assert st.value() == "1"  # outside a transaction block a local set does nothing
    st.change("session", "4", in_block=False)
    assert st.value() == "4"  # in its own implicit transaction: committed at once
    st.change("local", "5", in_block=True)
    st.change("session", "6", in_block=True)  # a session set replaces the local one
    st.end(committed=True)
    assert st.value() == "6"


def test_savepoints_roll_back_what_followed_them():
    st = State()
    st.change("session", "1", in_block=True)
    st.savepoint("savepoint", "a")
    st.change("session", "2", in_block=True)
    st.savepoint("savepoint", "b")
    st.change("local", "3", in_block=True)
    st.savepoint("rollback", "b")
    assert st.value() == "2"
    st.savepoint("rollback", "a")
    assert st.value() == "1"
    st.change("session", "7", in_block=True)
    st.savepoint("release", "a")
    st.end(committed=True)
    assert st.value() == "7"


def test_an_end_not_seen_makes_a_change_of_that_transaction_unknown():
    st = State()
    st.change("session", "1", in_block=True)
    st.end(committed=None)
    assert st.value() is UNKNOWN
    st.change("session", "2", in_block=False)
    assert st.value() == "2"  # a known change replaces it
    st.change("unknown", UNKNOWN, in_block=True)
    st.end(committed=False)
    assert st.value() == "2"  # rolled back: whatever it did is undone


def test_a_statement_leaks_only_as_another_tenant():
    def st(value, known=True):
        return StatementTenant(2, 1, "w1.0", 1.0, "select 1", value, known)

    assert st("1").as_tenant(4) == "1"
    assert st("4").as_tenant(4) is None
    assert st("").as_tenant(4) is None  # no tenant: no leak (the job's own read judges the rows)
    assert st("1").as_tenant(None) == "1"  # a system job as any tenant
    assert st(None, known=False).as_tenant(None) is None


def test_the_contract_clients_copy_answers_as_the_originals():
    """workers/clients/python/pgjc_tenant.py is a copy (the client runs where pg-job-chaos is not
    installed): the same forms give the same changes, and the same state machine the same values."""
    import sys

    from pg_job_chaos.workers.hosted import contract

    sys.path.insert(0, str(contract.CLIENTS / "python"))
    try:
        import pgjc_tenant
    finally:
        sys.path.pop(0)
    corpus = [(text, params) for text, params, _ in FORMS] + [
        ("select set_config('app.tenant', (select '1'), false)", None), ("commit", None),
        ('ROLLBACK TO SAVEPOINT "_pg3_1"', None), ("begin; set local app.tenant = '2'; commit", None)]
    for text, params in corpus:
        assert pgjc_tenant.changes(text, NAME, params) == changes(text, NAME, params), text
        assert pgjc_tenant.mentions(text, NAME) == tenant_track.mentions(text, NAME), text
    mine, theirs = State(), pgjc_tenant.State()
    for st in (mine, theirs):
        st.change("session", "1", in_block=True)
        st.savepoint("savepoint", "a")
        st.change("local", "2", in_block=True)
    assert mine.value() == theirs.value() == "2"
    for st in (mine, theirs):
        st.savepoint("rollback", "a")
        st.end(committed=True)
    assert mine.value() == theirs.value() == "1"
