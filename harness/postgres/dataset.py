"""The article's database inside a database of our own: schema, data, worker role, fast reset.

Everything here runs as the *admin* role (the owner of the tables). Workers never do: they log
in as the ordinary role created by :func:`install`, to which forced row-level security applies.
"""

from __future__ import annotations

import time

import psycopg
from psycopg import sql

from ...core import sqlfile

Q = sqlfile.load(
    __file__, "schema.sql",
    "create_tables", "load_data", "enable_rls", "tenant_policy", "create_worker_role", "grant_worker",
    "reset_queue", "final_runs",
)

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
    """Create tables, load the data, force RLS and grant the worker role. Idempotence is not promised:
    call it once, on a fresh database."""
    with psycopg.connect(admin_dsn, autocommit=False) as conn:
        conn.execute(Q.create_tables)
        conn.execute(Q.load_data)
        conn.execute(Q.enable_rls)
        conn.execute(sql.SQL(Q.grant_worker).format(
            worker=sql.Identifier(worker_role), database=sql.Identifier(database)))
        conn.commit()


def reset(conn: psycopg.Connection) -> float:
    """Empty ``jobs`` and ``job_runs`` (invoices untouched). Returns the seconds it took.

    Hazard: TRUNCATE needs an ACCESS EXCLUSIVE lock; every worker of the previous run must be
    gone (the supervisor kills them first), or this waits for them.
    """
    t0 = time.perf_counter()
    with conn.transaction():
        conn.execute(Q.reset_queue)
    return time.perf_counter() - t0
