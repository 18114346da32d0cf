"""Tenant modes: how a worker sets and clears ``app.tenant`` on a pooled connection.

Each mode is a pool configuration plus a way to set the tenant, used exactly as a real worker
would use psycopg_pool (pools are created in the worker process, after fork):

============================  ==========================================================
``local``                     ``set_config(.., true)`` inside the job's transaction: the fix
``session``                   ``set_config(.., false)``: survives a commit, undone by a rollback
``session-autocommit``        pool connections in autocommit: the setting survives every job
``reset``                     reset callback ``RESET app.tenant`` in autocommit
``reset-no-autocommit``       the same without autocommit: the reset leaves a transaction open
                              and the pool discards the connection after every job
``discard-all``               reset callback ``DISCARD ALL`` (autocommit), psycopg's default
                              ``prepare_threshold``: prepared statements vanish under psycopg
``discard-all-unprepared``    the same with ``prepare_threshold=None``: works
============================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool

_DEFAULT = object()
POOL_TIMEOUT = 30.0  # seconds a worker waits for a pool connection before the job fails


def _reset_autocommit(statement: str) -> Callable[[psycopg.Connection], None]:
    def reset(conn: psycopg.Connection) -> None:
        conn.autocommit = True  # DISCARD ALL cannot run in a transaction block; RESET need not open one
        conn.execute(statement)
        conn.autocommit = False

    return reset


def _reset_in_transaction(statement: str) -> Callable[[psycopg.Connection], None]:
    def reset(conn: psycopg.Connection) -> None:
        # Hazard (the article's trap): without autocommit this opens a transaction, so the pool
        # finds the connection not idle and discards it -- one new connection per job.
        conn.execute(statement)

    return reset


@dataclass(frozen=True)
class TenantMode:
    name: str
    local: bool  # set_config's is_local
    autocommit: bool = False
    reset: Callable[[psycopg.Connection], None] | None = None
    prepare_threshold: object = _DEFAULT  # _DEFAULT: psycopg's own (5)
    summary: str = ""

    def pool(self, conninfo: str, *, size: int = 1, name: str = "jobs",
             configure: Callable[[psycopg.Connection], None] | None = None,
             application_name: str = "pg-job-chaos") -> ConnectionPool:
        """An open pool as a worker of this mode would create it: one connection at start, up to *size*
        opened as they are needed (a pool of a hosted library's bodies may be large; only what runs at
        once is opened), and kept for the run.

        Each connection is checked before it is lent (psycopg_pool's ``check_connection``: an empty
        statement, as SQLAlchemy's ``pool_pre_ping`` does): one a server restart or a promotion cut
        while it sat in the pool is replaced, not handed to a job. A production body pool does so;
        without it the first body after a restart fails on "server closed the connection
        unexpectedly" and the queue counts an attempt that the harness's pool burned, not the
        system under test (``docs/reference/contract.md``, "Body connections")."""
        kwargs: dict = {"autocommit": self.autocommit, "application_name": application_name}
        if self.prepare_threshold is not _DEFAULT:
            kwargs["prepare_threshold"] = self.prepare_threshold
        pool = ConnectionPool(
            conninfo, min_size=1, max_size=size, kwargs=kwargs, configure=configure,
            reset=self.reset, name=name, open=False, timeout=POOL_TIMEOUT,
            check=ConnectionPool.check_connection,
        )
        pool.open(wait=True, timeout=POOL_TIMEOUT)
        return pool


SETTING = "app.tenant"  # what the tenant modes set, and what provisioning's invoices policy reads

MODES: dict[str, TenantMode] = {m.name: m for m in [
    TenantMode("local", local=True, summary="set_config(.., true) in the job's transaction"),
    TenantMode("session", local=False, summary="set_config(.., false): leaks after a job that succeeds"),
    TenantMode("session-autocommit", local=False, autocommit=True,
               summary="autocommit pool, set_config(.., false): leaks after every job"),
    TenantMode("reset", local=False, reset=_reset_autocommit("RESET app.tenant"),
               summary="reset callback RESET app.tenant in autocommit"),
    TenantMode("reset-no-autocommit", local=False, reset=_reset_in_transaction("RESET app.tenant"),
               summary="reset callback without autocommit: a new connection per job"),
    TenantMode("discard-all", local=False, reset=_reset_autocommit("DISCARD ALL"),
               summary="reset callback DISCARD ALL: breaks psycopg's prepared statements"),
    TenantMode("discard-all-unprepared", local=False, reset=_reset_autocommit("DISCARD ALL"),
               prepare_threshold=None, summary="DISCARD ALL with prepare_threshold=None"),
]}


def check_schedule(s, bad: Callable[[str], None]) -> None:
    """A :data:`core.schedule.Validator`: the schedule's tenant mode exists."""
    if s.tenant_mode not in MODES:
        bad(f"tenant_mode: unknown mode {s.tenant_mode!r}; modes: {', '.join(MODES)}")
