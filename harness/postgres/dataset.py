"""The article's database inside a database of our own: schema, data, worker role, fast reset.

Everything here runs as the *admin* role (the owner of the tables). Workers never do: they log
in as the ordinary role created by :func:`install`, to which forced row-level security applies.

The tables live in the schema :data:`SCHEMA` (``pgjc``), not in ``public``: a user's design may create
its own ``jobs`` there. The database's default ``search_path`` puts ours last (``schema.sql``:
``search_path``), so a design's SQL that names the article's tables bare still finds them where the
user has none; :func:`shadowed` says where one of the user's hides ours from such a design.
"""

from __future__ import annotations

import re
import time

import psycopg
from psycopg import sql

from ...core import sqlfile
from ...core.db import one
from ...core.errors import UsageError
from . import transitions

Q = sqlfile.load(
    __file__, "schema.sql",
    "create_schema", "create_tables", "load_data", "enable_rls", "tenant_policy", "create_worker_role",
    "grant_worker", "reset_queue", "reset_lock", "reset_delete", "final_runs", "search_path", "resolve",
)

SCHEMA = "pgjc"  # the harness's tables' schema; the .sql files beside the code that sends them name it
TABLES = ("tenants", "invoices", "jobs", "job_runs", "job_map")  # provisioning's, in SCHEMA
# with lease-outbox's and the status log (the experiments' exp_* tables live only as they run)
OURS = (*TABLES, "outbox", transitions.TABLE)
# Ours that a design's own SQL names bare, as the article does: the built-in designs' queue
# (workers/*.sql). The harness's own statements name SCHEMA, so only these can be shadowed.
BARE = ("jobs",)

INVOICES_TOTAL = 103_707  # sum(floor(20000 / t) for t in 1..100)


def invoices_of(tenant: int) -> int:
    """How many invoices tenant *tenant* owns in the article's data set."""
    return 20000 // tenant


def expected_rows(tenants) -> dict[str, int]:
    """``{tenant: invoices it owns}`` for the tenants of a schedule (JSON keys: text), for the history."""
    return {str(t): invoices_of(t) for t in sorted({t for t in tenants if t is not None})}


def tenant_policy(conn: psycopg.Connection, setting: str) -> None:
    """Make the invoices' row-level security policy read *setting* (the owner's connection)."""
    conn.execute(sql.SQL(Q.tenant_policy).format(setting=sql.Literal(setting)))


def create_role(conn: psycopg.Connection, role: str, password: str) -> None:
    conn.execute(sql.SQL(Q.create_worker_role).format(worker=sql.Identifier(role),
                                                      password=sql.Literal(password)))


def install(admin_dsn: str, *, database: str, worker_role: str) -> None:
    """Create the schema and its tables, load the data, force RLS, grant the worker role, and set the
    database's ``search_path``. Idempotence is not promised: call it once, on a fresh database. A
    schema of our name already there (the server's template database had one: a DSN's server) is a
    :class:`UsageError` naming it and the fix."""
    with psycopg.connect(admin_dsn, autocommit=False) as conn:
        try:
            conn.execute(Q.create_schema)
        except psycopg.errors.DuplicateSchema:
            raise UsageError(
                f"database {database} already has a schema {SCHEMA} before the harness made its own: "
                f"the server's template database (template1) carries one, and every new database copies "
                f"it; the harness keeps its tables in {SCHEMA}. Drop it from template1 (connected to "
                f"template1: drop schema {SCHEMA} cascade), or run on another server (postgres)") from None
        conn.execute(Q.create_tables)
        transitions.install(conn)
        conn.execute(Q.load_data)
        conn.execute(Q.enable_rls)
        conn.execute(sql.SQL(Q.grant_worker).format(
            worker=sql.Identifier(worker_role), database=sql.Identifier(database)))
        set_search_path(conn, database)
        conn.commit()


def set_search_path(conn: psycopg.Connection, database: str) -> None:
    """Make our schema last on *database*'s default ``search_path`` (its owner's connection, to any
    database of the server). For sessions that start afterwards; a clone (``CREATE DATABASE ...
    TEMPLATE``) does not inherit it and needs it set again."""
    conn.execute(sql.SQL(Q.search_path).format(database=sql.Identifier(database)))


def shadowed(conn: psycopg.Connection, names=BARE) -> dict[str, str | None]:
    """``{name: the schema it resolves to}`` for each of *names* (ours, named bare) that *conn*'s
    ``search_path`` does not resolve to :data:`SCHEMA`: a user's table hides it (``public.jobs``:
    ``public``), or nothing has that name on the path (None)."""
    return {n: where for n, where in conn.execute(Q.resolve, {"names": list(names)}) if where != SCHEMA}


_QUOTED = re.compile(r'"([A-Za-z_][A-Za-z0-9_$]*)"')
_OLD_PLACE = re.compile(r'"public\.([A-Za-z_][A-Za-z0-9_$]*)"')


def clash(conn: psycopg.Connection, exc: psycopg.Error, design: str, step: str) -> UsageError | None:
    """A :class:`UsageError` naming the table and the fix when *exc*, raised by a user's design's
    *step* (its install, reset, enqueue or final_states, on the admin connection *conn*), was about our
    schema; about ``public.jobs`` (one of ours, where the old layout kept it) when there is none; about
    one of our tables reached by its bare name (the user's database has none of that name, so the name
    falls through the ``search_path`` to ours); or about a column the message ties to no table (a
    select's, an index's: the statement may name one of ours bare). Else None (the design's own
    business). Judged from the server's message and diagnostics."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    diag = exc.diag
    if diag.schema_name == SCHEMA or re.search(rf"\b{SCHEMA}\b", first):
        return UsageError(
            f"design {design}: its {step} failed on the harness's schema {SCHEMA}: {first}. The harness "
            f"keeps its own tables in {SCHEMA}; keep yours in public or in a schema of another name")
    old = [n for n in _OLD_PLACE.findall(first) if n in OURS]
    if old and exc.sqlstate == "42P01":  # undefined_table: written for the old layout, ours in public
        return UsageError(
            f"design {design}: its {step} failed: {first}. The harness's tables are no longer in public "
            f"but in its schema {SCHEMA}: name it {SCHEMA}.{old[0]}, or bare, {old[0]} (the search_path "
            f"finds it while the database has no {old[0]} of its own)")
    named = [n for n in dict.fromkeys([*_QUOTED.findall(first), diag.table_name or ""]) if n in OURS]
    for name, where in conn.execute(Q.resolve, {"names": named}) if named else ():
        if where == SCHEMA:
            return UsageError(
                f"design {design}: its {step} failed on {name}: {first}. With no {name} table of its own "
                f"in the database, the bare name {name} reaches the harness's table {SCHEMA}.{name}. "
                f"Create yours in install first (create table if not exists public.{name} ...), or name "
                f"it otherwise")
    # undefined_column in a select or an index: the message names the column, not its table
    if exc.sqlstate == "42703" and len(_QUOTED.findall(first)) == 1:
        reach = [n for n, where in conn.execute(Q.resolve, {"names": list(OURS)}) if where == SCHEMA]
        if reach:
            return UsageError(
                f"design {design}: its {step} failed: {first}. If the statement names {' or '.join(reach)} "
                f"bare: with no table of that name of its own in the database, the name reaches the "
                f"harness's, in its schema {SCHEMA}. Create yours in install first (create table if not "
                f"exists public.NAME ...), or name it otherwise")
    return None


DEAD_ROWS = 5000  # rows a database's resets may leave dead before one truncates them away
_dead: dict[tuple, int] = {}  # rows deleted since the last TRUNCATE, per database (host, port, name)


def reset(conn: psycopg.Connection) -> float:
    """Empty ``jobs``, ``job_runs``, ``job_map`` and ``job_transitions``, their counters back to 1
    (invoices untouched). Returns the seconds it took.

    By DELETE while few rows have been deleted since the last TRUNCATE (:data:`DEAD_ROWS`), else -- in
    the same transaction -- by TRUNCATE: a search's runs each leave a handful of dead rows that
    autovacuum and page pruning clear, and a run of thousands of jobs is truncated away at once.
    Hazard: both wait for every transaction still writing these tables (the supervisor kills the
    workers first; a backend whose worker died may still be finishing a statement).
    """
    t0 = time.perf_counter()
    key = (conn.info.host, conn.info.port, conn.info.dbname)
    with conn.transaction():
        conn.execute(Q.reset_lock)
        deleted = one(conn.execute(Q.reset_delete))[0]
        _dead[key] = _dead.get(key, 0) + deleted
        if _dead[key] > DEAD_ROWS:
            conn.execute(Q.reset_queue)
            _dead[key] = 0
    return time.perf_counter() - t0
