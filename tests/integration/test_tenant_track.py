"""The tenant setting tracked client-side (workers/tenant/track.py through workers/body/statements.py),
checked against the real server: after every form of change, transaction end, savepoint, error transaction,
pipeline and pool reset, the tracked value is what ``current_setting`` says -- or ``unknown``, never a
wrong value; and every custom setting the code sets by name is logged once (``setting-set``). The wrapper
is installed in this process for each test and taken off after it."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import ConnectionPool

from pg_job_chaos.core.execlog import ExecLog
from pg_job_chaos.workers.body import statements
from pg_job_chaos.workers.body.execution import Claimed
from pg_job_chaos.workers.tenant import track as tenant_track
from pg_job_chaos.workers.tenant.modes import MODES
from pg_job_chaos.workers.tenant.track import UNKNOWN, UNSET

pytestmark = pytest.mark.integration


@pytest.fixture
def tracked(tmp_path):
    """The statement wrapper installed in this process with a worker context of its own; its log's
    records as ``tracked.records()``."""
    # Another test may have installed the wrapper in this process (test_statements.py does): then only
    # its worker context is swapped, and put back after.
    base = psycopg.Connection.__mro__[1]
    saved = [(cls, n, cls.__dict__[n]) for cls in (psycopg.Cursor, psycopg.AsyncCursor)
             for n in ("execute", "executemany")] + [(base, "_exec_command", base.__dict__["_exec_command"])]
    previous = statements._ctx
    log = ExecLog(tmp_path / "w1.0.events.jsonl", "w1.0")
    ctx = SimpleNamespace(spec=SimpleNamespace(tenant_setting="app.tenant", watch=frozenset()), log=log,
                          statements_seen=set(), settings_seen=set())
    ctx.records = lambda: [json.loads(line) for line in log.path.read_text().splitlines()]
    statements.install(ctx)
    try:
        yield ctx
    finally:
        for cls, n, method in saved:
            setattr(cls, n, method)
        statements._ctx = previous
        statements.set_current(None)
        log.close()


def truth(conn) -> str:
    """What the server says, as the tracking spells it ('' for none)."""
    return conn.execute("select current_setting('app.tenant', true)").fetchone()[0] or UNSET


def agree(conn) -> str | None:
    value = tenant_track.in_force(conn)
    assert value == truth(conn)
    return value


def test_every_form_in_autocommit_and_in_a_transaction(tracked, database):
    with psycopg.connect(database.worker_dsn, autocommit=True) as conn:
        assert agree(conn) == UNSET  # a new connection starts unset
        for text, params, want in [
            ("select set_config('app.tenant', %s, false)", ["1"], "1"),
            ("select set_config('app.tenant', '2', true)", None, "1"),  # local outside a block: nothing
            ("set app.tenant = '3'", None, "3"),
            ("reset app.tenant", None, UNSET),
            ("set session app.tenant to '4'", None, "4"),
            ("reset all", None, UNSET),
            ("select set_config(%s, %s, %s)", ["app.tenant", "5", False], "5"),
            ("discard all", None, UNSET),
        ]:
            conn.execute(text, params)
            assert agree(conn) == want, text
    with psycopg.connect(database.worker_dsn) as conn:  # not autocommit: every statement in a block
        conn.execute("select set_config('app.tenant', '6', true)")
        assert agree(conn) == "6"
        conn.commit()
        assert agree(conn) == UNSET  # a local setting ends at COMMIT
        conn.execute("set local app.tenant = '7'")
        conn.rollback()
        assert agree(conn) == UNSET  # ... and at ROLLBACK
        conn.execute("select set_config('app.tenant', '8', false)")
        conn.rollback()
        assert agree(conn) == UNSET  # a session SET in a transaction that rolls back reverts
        conn.execute("select set_config('app.tenant', '9', false)")
        conn.commit()
        assert agree(conn) == "9"
        conn.execute("select set_config('app.tenant', '10', false); commit")  # a COMMIT in the string
        assert agree(conn) == "10"


def test_each_custom_setting_the_code_sets_by_name_is_logged_once_beside_the_declared_one(tracked, database):
    """The records ``core/misdeclared.py`` reads (issue 46): a tenant code that sets another setting than
    the declared ``tenant_setting`` is told from one that sets it; a built-in setting is none of them."""
    statements.set_current(Claimed(1, 1, 1))
    with psycopg.connect(database.worker_dsn, autocommit=True) as conn:
        conn.execute("select set_config('app.current_tenant', %s, false)", ["1"])
        conn.execute("select set_config('app.current_tenant', %s, false)", ["2"])  # once per worker
        conn.execute(sql.SQL("select set_config({}, {}, false)").format(sql.Literal("app.user_id"),
                                                                        sql.Literal("7")))  # composed
        conn.execute("set app.tenant = '3'")
        conn.execute("set statement_timeout = 5000")  # not a custom setting
    sets = [(r["setting"], r["declared"], r["job"]) for r in tracked.records() if r["event"] == "setting-set"]
    assert sets == [("app.current_tenant", "app.tenant", 1), ("app.user_id", "app.tenant", 1),
                    ("app.tenant", "app.tenant", 1)]


def test_savepoints_of_psycopgs_transaction_blocks(tracked, database):
    with psycopg.connect(database.worker_dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("select set_config('app.tenant', '1', false)")
            with pytest.raises(ZeroDivisionError), conn.transaction():
                conn.execute("select set_config('app.tenant', '2', false)")
                assert agree(conn) == "2"
                raise ZeroDivisionError  # ROLLBACK TO the savepoint
            assert agree(conn) == "1"
            with conn.transaction():
                conn.execute("set local app.tenant = '3'")
            assert agree(conn) == "3"  # RELEASE keeps it until the outer block ends
        assert agree(conn) == "1"


def test_an_error_transaction_gets_no_extra_statement_and_rolls_back(tracked, database):
    statements.set_current(Claimed(2, 4, 1))
    with psycopg.connect(database.worker_dsn) as conn:
        conn.execute("select set_config('app.tenant', '1', false)")
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("select 1/0")
        # the user's next statement gets the user's error, not one of ours
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("select 'in error'")
        assert tenant_track.in_force(conn) == "1"
        conn.rollback()
        statements.set_current(None)
        assert agree(conn) == UNSET
    mine = [r for r in tracked.records() if r["event"] == "tenant-statement"]
    assert [(r["statement"], r["value"]) for r in mine] == [
        ("select 1/0", "1"), ("select 'in error'", "1")], mine


def test_pipeline_mode_says_unknown_rather_than_guess(tracked, database):
    with psycopg.connect(database.worker_dsn, autocommit=True) as conn:
        conn.execute("set app.tenant = '1'")
        with conn.pipeline():
            conn.execute("select 1")
            assert tenant_track.in_force(conn) == "1"  # nothing changed yet: still known
            conn.execute("select set_config('app.tenant', '2', false)")
            assert tenant_track.in_force(conn) is UNKNOWN
        assert truth(conn) == "2"
        conn.execute("set app.tenant = '3'")
        assert agree(conn) == "3"  # a known change outside the pipeline makes it known again


def test_a_computed_value_is_unknown_until_a_known_change(tracked, database):
    with psycopg.connect(database.worker_dsn, autocommit=True) as conn:
        conn.execute("select set_config('app.tenant', (select '7'), false)")
        assert tenant_track.in_force(conn) is UNKNOWN and truth(conn) == "7"
        conn.execute("reset app.tenant")
        assert agree(conn) == UNSET


@pytest.mark.parametrize("mode", ["reset", "discard-all", "session-autocommit"])
def test_the_pools_reset_callback_outside_the_job(tracked, database, mode):
    """The reset runs when the connection goes back, outside any job: the next borrower starts from it."""
    with ConnectionPool(database.worker_dsn, min_size=1, max_size=1, reset=MODES[mode].reset, open=True,
                        kwargs={"autocommit": MODES[mode].autocommit}) as pool:
        with pool.connection() as conn:
            conn.execute("select set_config('app.tenant', '1', false)")
        with pool.connection() as conn:
            assert agree(conn) == ("1" if mode == "session-autocommit" else UNSET)


def test_async_cursors(tracked, database):
    async def main():
        async with await psycopg.AsyncConnection.connect(database.worker_dsn) as conn:
            await conn.execute("select set_config('app.tenant', '1', false)")
            assert tenant_track.in_force(conn) == "1"
            await conn.rollback()
            assert tenant_track.in_force(conn) == UNSET
            async with conn.transaction():
                await conn.execute("select set_config('app.tenant', %s, false)", ["2"])
            await conn.execute("select count(*) from pg_class")  # a job's statement, logged
            got = await (await conn.execute("select current_setting('app.tenant', true)")).fetchone()
            return got[0], tenant_track.in_force(conn)

    statements.set_current(Claimed(5, None, 1))
    assert asyncio.run(main()) == ("2", "2")
    mine = [r for r in tracked.records() if r["event"] == "tenant-statement"]
    assert {"job": 5, "statement": "select count(*) from pg_class", "value": "2", "known": True}.items() \
        <= next(r for r in mine if r["statement"].startswith("select count")).items()


def test_executemany_reads_a_list_and_leaves_a_generator_to_the_user(tracked, database):
    with psycopg.connect(database.worker_dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("select set_config('app.tenant', %s, false)", [["1"], ["2"]])
        assert agree(conn) == "2"
        cur.executemany("select set_config('app.tenant', %s, false)", (p for p in [["3"], ["4"]]))
        assert tenant_track.in_force(conn) is UNKNOWN and truth(conn) == "4"  # the generator not consumed


def test_a_change_and_its_transactions_end_in_one_string(tracked, database):
    with psycopg.connect(database.worker_dsn) as conn:
        conn.execute("select set_config('app.tenant', '1', false); rollback")
        assert agree(conn) == UNSET
        conn.execute("select set_config('app.tenant', '2', false); commit")
        assert agree(conn) == "2"
