"""The supervisor's own database session: guarded queries, ``pg_stat_activity`` samples, holders.

Every query here runs as the admin role with a ``statement_timeout``; a failure (a timeout, a lost
connection) becomes a note in the history and a default value, never the end of the run, and a
broken connection is replaced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TypeVar

import psycopg
from psycopg.rows import TupleRow

from ...core import sqlfile

Q = sqlfile.load(__file__, "admin.sql", "activity", "terminate", "hold_xid", "hold_snapshot")
log = logging.getLogger("pgjc.supervisor")
T = TypeVar("T")

STATEMENT_TIMEOUT_MS = 5000  # the supervisor's own queries can never hang a run
CONNECT_TIMEOUT = 5  # seconds
APP = "pg-job-chaos/supervisor"
HOLDER_APP = "pg-job-chaos/holder"


class Holder:
    """A session that holds a transaction open for the horizon fault (see ``faults.api.Holder``)."""

    def __init__(self, dsn: str, variant: str):
        self.conn = psycopg.connect(dsn, application_name=HOLDER_APP, connect_timeout=CONNECT_TIMEOUT)
        if variant == "repeatable-read":
            self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            self.conn.execute(Q.hold_snapshot)
        else:
            self.conn.execute(Q.hold_xid)
        self.backend_pid = self.conn.info.backend_pid

    def close(self) -> None:
        try:
            self.conn.rollback()
            self.conn.close()
        except psycopg.Error:
            pass


class Admin:
    """The supervisor's session. ``notes`` collects what failed, for the history."""

    def __init__(self, dsn: str, notes: list[str]):
        self.dsn = dsn
        self.notes = notes
        self.conn = self._connect()

    def _connect(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT,
                               options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}", application_name=APP)

    def reconnect(self) -> None:
        """A new session (after a server restart broke the old one); a failure is a note."""
        try:
            self.conn.close()
            self.conn = self._connect()
        except psycopg.Error as exc:
            self.notes.append(f"supervisor: reconnecting after the restart failed: {exc}")

    def guarded(self, what: str, fn: Callable[[psycopg.Connection], T], default: T) -> T:
        """``fn(conn)``, or *default* with a note when it fails."""
        try:
            return fn(self.conn)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()
            self.notes.append(f"supervisor: {what} failed: {first[0] if first else type(exc).__name__}")
            log.warning("%s", self.notes[-1])
            if self.conn.closed or self.conn.broken:
                try:
                    self.conn = self._connect()
                except psycopg.Error:
                    pass
            return default

    def sample(self, now: float, workers: Collection[str]) -> list[dict]:
        """One ``pg_stat_activity`` sample of our database: each session's role (worker, holder or
        other), state, xid, xmin and transaction age."""
        rows: list[TupleRow] = self.guarded("sampling pg_stat_activity",
                                            lambda c: c.execute(Q.activity).fetchall(), [])
        out = []
        for pid, app, state, xid, xmin, age in rows:
            base = (app or "").split("/", 1)[0]
            role = "holder" if app == HOLDER_APP else "worker" if base in workers else "other"
            out.append({"t": now, "pid": pid, "app": app, "role": role, "state": state,
                        "xid": xid, "xmin": xmin, "xact_age": age})
        return out

    def pending(self, design) -> int | None:
        """The design's count of jobs its workers may still act on (None: the query failed)."""
        return self.guarded("the quiescence check", design.pending, None)

    def terminate(self, pid: int) -> None:
        self.guarded("pg_terminate_backend", lambda c: c.execute(Q.terminate, {"pid": pid}), None)

    def close(self) -> None:
        self.conn.close()
