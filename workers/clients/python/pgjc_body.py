"""The job body of the worker contract's Python client (``pgjc_contract``): one execution, in the
order and with the records of the harness's hosted body (``docs/reference/contract.md``)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Protocol

import psycopg
from psycopg.rows import TupleRow


class Client(Protocol):
    """What an execution needs of its client (``pgjc_contract.Client`` is the one): named here, not
    imported, so that the two modules do not import each other."""

    spec: dict[str, Any]
    identity: str
    watch: set[tuple[int, str]]
    seconds: dict[str, float]
    started: int
    _local: threading.local

    def log(self, event: str, **fields: Any) -> None: ...

    def wait(self, job: int | None, attempt: int | None, point: str, backend: int | None) -> None: ...

    def borrow(self) -> psycopg.Connection: ...

    def release(self, conn: psycopg.Connection) -> None: ...

    def started_count(self, job: int) -> int: ...


EXIT_CRASH = 1


def _one(cur: psycopg.Cursor[TupleRow]) -> TupleRow:
    """The row of a statement that always returns one (:class:`LookupError` when it returned none)."""
    row = cur.fetchone()
    if row is None:
        raise LookupError("the statement returned no row (it always returns one)")
    return row


class InjectedError(Exception):
    """A job fault ``raise``: the body raised, as a job's code does."""


class Execution:
    """One execution: the steps of the harness's hosted body, in its order, each logged."""

    def __init__(self, client: Client, args: dict, attempt: int, work=None):
        self.c = client
        self.args = args
        self.attempt = attempt
        self.work = work
        self.job = int(args["job"])
        self.tenant = args.get("tenant")
        self.reached: list[str] = []
        self.fault = client.spec["faults"].get(args.get("fault")) if args.get("fault") else None
        self.fault_name = args.get("fault")

    def _log(self, event: str, **fields) -> None:
        self.c.log(event, job=self.job, attempt=self.attempt, **fields)

    def run(self) -> None:
        c = self.c
        sql = self.c.spec["sql"]
        c.started += 1
        c._local.job = self.job
        c._local.attempt = self.attempt
        conn = self.conn = c.borrow()
        try:
            self._log("started", tenant=self.tenant, fault=self.fault_name)
            if args_strikes := self.args.get("strikes"):
                nth = c.started_count(self.job)
                self._log("execution-count", nth=nth, strikes=args_strikes)
                if nth > args_strikes:
                    self.fault = None
            me = f"{c.identity} {self.job} {self.attempt}".replace("'", "''")
            value, last, pid, _ = _one(conn.execute(sql["inherited_tenant"].replace("{me}", f"'{me}'")))
            self._log("tenant-inherited", value=value, last=last, backend=pid)
            self.point("before-tenant")
            self.set_tenant()
            visible, foreign = _one(conn.execute(sql["read_invoices"], {"tenant": self.tenant}))
            self._log("rows-visible", tenant=self.tenant, visible=visible, foreign=foreign)
            started = _one(conn.execute("select clock_timestamp()"))[0]
            conn.commit()
            if self.work is not None:  # the job's own code: its statements are the job's
                self.work()
            total = self.work_seconds()
            time.sleep(total / 2)
            self.point("mid-work")
            time.sleep(total / 2)
            self._log("effect")
            self.point("after-effect")
            self.point("before-finish")
            if c.spec["tenant"]["autocommit"]:
                conn.execute("begin")
            self.set_tenant()
            conn.execute(sql["insert_finished_run"], {"job": self.job, "worker": c.identity,
                                                      "attempt": self.attempt, "started": started})
            conn.commit()
            self.point("after-insert")
        except BaseException as exc:
            text = str(exc).strip().splitlines()
            self._log("failed", error=f"{type(exc).__name__}: {text[0] if text else ''}", points=self.reached)
            if not conn.broken and not conn.closed:
                conn.rollback()
            raise
        finally:
            if c.spec["tenant"]["reset"] and not conn.closed and not conn.broken:
                conn.autocommit = True
                conn.execute(c.spec["tenant"]["reset"])
                conn.autocommit = c.spec["tenant"]["autocommit"]
            c.release(conn)
        self._log("finished", points=self.reached)

    def set_tenant(self) -> None:
        if self.tenant is not None:
            self.conn.execute(self.c.spec["sql"]["set_tenant"],
                              {"tenant": str(self.tenant), "local": self.c.spec["tenant"]["local"]})

    def work_seconds(self) -> float:
        seconds = float(self.args.get("duration") or 0.0) * self.c.spec["time_scale"]
        factor = self.fault and self.fault.get("work_lease_factor")
        return max(seconds, factor * self.c.seconds["lease"]) if factor else seconds

    def point(self, name: str) -> None:
        """A named point: the supervisor's wait if it watches it, then the job's own fault if it strikes
        here."""
        self.reached.append(name)
        if (self.job, name) in self.c.watch:
            self.c.wait(self.job, self.attempt, name, self.conn.info.backend_pid)
        f = self.fault
        if f is None or f.get("strike") is None or (self.args.get("point") or f.get("point")) != name:
            return
        self._log("fault", fault=self.fault_name, point=name)
        strike = f["strike"]
        if strike == "raise":
            raise InjectedError(f"injected fault: raise at {name}")
        if strike == "sql-error":
            self.conn.execute("select 1/0")
        elif strike == "crash":
            os._exit(EXIT_CRASH)  # no handler, no finally, no rollback
        elif strike == "hang":
            while True:
                time.sleep(3600)
        else:
            raise RuntimeError(f"pgjc_contract: unknown strike {strike!r} (contract 1)")
