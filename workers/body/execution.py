"""The job body every design runs (the worker context it runs in is ``workers/body/context.py``).

One execution of one job, in order (designs choose where their transactions begin and end):

1. ``started`` to the execution log;
2. read the **inherited** tenant (``current_setting('app.tenant', true)``) before setting any;
3. set the tenant per the tenant mode;
4. insert the ``job_runs`` row;
5. read invoices (how many are visible, how many are another tenant's);
6. work for the job's duration;
7. the **external side effect** ("an e-mail sent"): a line in the execution log, never undone;
8. finish per the design, and record ``finished`` / ``failed`` / ``fenced``.

Named strike points (``faults.POINTS``) sit between the steps; at each, a job fault may strike
and the supervisor may be waiting to strike from outside.
"""

from __future__ import annotations

import signal
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import psycopg
from psycopg import sql

from ...core import sqlfile
from ...core.db import one
from ...core.events import LogEvent
from ...core.execlog import ExecLog, started_count
from ...core.schedule import Schedule
from ...faults.catalogue import CATALOGUE
from ..tenant.modes import SETTING, TenantMode

Q = sqlfile.load(__file__, "body.sql", "inherited_tenant", "server_pid", "set_tenant", "insert_run",
                 "insert_finished_run", "finish_run", "read_invoices")

STRIKE_SIGNAL = signal.SIGUSR1  # the supervisor's "go on" after it struck at a point
WAKE_SIGNAL = signal.SIGUSR2  # the supervisor's "look again now" to an idle worker (supervisor/loop.py)


@dataclass(frozen=True)
class Claimed:
    """A job as a design claimed it: the attempt is what *this* worker believes it is running."""

    id: int
    tenant: int | None
    attempt: int
    payload: dict = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return float(self.payload.get("duration", 0.0))

    @property
    def fault(self) -> str | None:
        return self.payload.get("fault")

    @property
    def point(self) -> str | None:
        return self.payload.get("point")

    @property
    def strikes(self) -> int | None:
        """A transient fault strikes only the job's first *strikes* executions (None: every one)."""
        return self.payload.get("strikes")


@dataclass
class WorkerSpec:
    """Everything a forked worker needs; built by the supervisor before the fork."""

    identity: str
    schedule: Schedule
    worker_dsn: str
    run_dir: Path
    # (job, point) pairs the supervisor strikes at; job None: a statement point of no job (statements.py)
    watch: frozenset[tuple[int | None, str]] = frozenset()
    tenant_setting: str = SETTING  # the design's (HostedDesign.tenant_setting): its own tenant code's
    # The identity the worker gives its system (a library's worker / executor id); "": its own identity.
    # A deploy's same-identity replacement carries the old worker's (faults/supervisor.py's deploy).
    system_id: str = ""


class BodyContext(Protocol):
    """What the body needs of the worker it runs in (:class:`workers.body.context.WorkerContext` is one)."""

    identity: str
    spec: WorkerSpec
    schedule: Schedule
    mode: TenantMode
    log: ExecLog
    lease: float

    def sleep(self, seconds: float) -> None: ...

    def idle_sleep(self, seconds: float) -> None: ...

    def wait_for_supervisor(self, job: Claimed, point: str, backend: int | None) -> None: ...


class Execution:
    """One execution of one job by this worker: the body's steps, each logged."""

    def __init__(self, ctx: BodyContext, conn: psycopg.Connection, job: Claimed):
        self.ctx = ctx
        self.conn = conn
        self.job = job
        self.point_name: str | None = None
        self.reached: list[str] = []  # the points this execution passed, logged with its outcome
        self.run_id: int | None = None
        self.t_started = time.monotonic()
        self.nth: int | None = None  # which execution of the job in the run this is (see started)
        self.left: tuple[float, float] | None = None  # (monotonic, wall) when the body raised (see failed)

    def _log(self, event: str, **fields) -> None:
        self.ctx.log.write(event, job=self.job.id, attempt=self.job.attempt, **fields)

    def _ended(self) -> None:
        """Its end record is written: the context stops logging statements as this execution's."""
        ended = getattr(self.ctx, "execution_ended", None)  # a context of the body's own tests has none
        if ended is not None:
            ended()

    # --- steps -----------------------------------------------------------------------------------
    def started(self, **fields) -> None:
        self._log(LogEvent.STARTED, tenant=self.job.tenant, fault=self.job.fault, **fields)
        if self.job.strikes is not None:  # the run's own count, whatever attempt the design believes
            self.nth = started_count(self.ctx.spec.run_dir, self.job.id)
            self._log(LogEvent.EXECUTION_COUNT, nth=self.nth, strikes=self.job.strikes)

    def job_fault(self):
        """The job's fault as it strikes this execution: None once a transient fault's strikes are spent."""
        fault = CATALOGUE.get(self.job.fault) if self.job.fault else None
        if fault is not None and self.job.strikes is not None and (self.nth or 1) > self.job.strikes:
            return None
        return fault

    def point(self, name: str) -> None:
        """A named point: the supervisor strikes here if it watches it; then the job's own fault.
        Behind a pooler, the server session's pid is read and logged at every point."""
        self.point_name = name
        self.reached.append(name)
        backend = None
        if self.ctx.schedule.pooler is not None:
            backend = self._server_pid()
            self._log(LogEvent.SERVER_SESSION, point=name, backend=backend)
        if (self.job.id, name) in self.ctx.spec.watch:
            self.ctx.wait_for_supervisor(self.job, name,
                                         backend if self.ctx.schedule.pooler else self._backend())
        fault = self.job_fault()
        if fault is not None and fault.strike is not None and (self.job.point or fault.point) == name:
            self._log(LogEvent.FAULT, fault=fault.name, point=name)
            fault.strike(self)

    def _backend(self) -> int | None:
        try:
            return self.conn.info.backend_pid
        except Exception:
            return None

    def _server_pid(self) -> int | None:
        """``pg_backend_pid()`` of the server session this connection is on, or None when asking would
        change the design. Hazard: outside a transaction on a non-autocommit connection the query would
        open one (holding a snapshot across the work); behind transaction pooling the client then holds
        no server session anyway. In autocommit the pid is the session of that one statement. Never
        prepared (``prepare=False``): sent at every point, psycopg would prepare it at its sixth execution,
        and behind transaction pooling that ``_pg3_N`` collided with the other worker's on the shared server
        session -- an error this probe swallowed, the job then failing "current transaction is aborted"
        with no word of a prepared statement (issue 51). The harness's probe must not change the design's
        prepared statements."""
        status = self.conn.info.transaction_status
        if status == psycopg.pq.TransactionStatus.INTRANS or (
                status == psycopg.pq.TransactionStatus.IDLE and self.conn.autocommit):
            try:
                return one(self.conn.execute(Q.server_pid, prepare=False))[0]
            except psycopg.Error:
                return None
        return None

    def read_inherited(self) -> None:
        me = f"{self.ctx.identity} {self.job.id} {self.job.attempt}"
        value, last, pid, _ = one(self.conn.execute(inherited_tenant(me)))
        self._log(LogEvent.TENANT_INHERITED, value=value, last=last, backend=pid)

    def set_tenant(self) -> None:
        if self.job.tenant is not None:
            self.conn.execute(Q.set_tenant, {"tenant": str(self.job.tenant), "local": self.ctx.mode.local})

    def insert_run(self) -> None:
        self.run_id = one(self.conn.execute(
            Q.insert_run, {"job": self.job.id, "worker": self.ctx.identity, "attempt": self.job.attempt}
        ))[0]

    def insert_finished_run(self, started) -> None:
        self.conn.execute(Q.insert_finished_run, {"job": self.job.id, "worker": self.ctx.identity,
                                                  "attempt": self.job.attempt, "started": started})

    def finish_run(self) -> None:
        if self.run_id is not None:
            self.conn.execute(Q.finish_run, {"run": self.run_id})

    def read_invoices(self) -> None:
        visible, foreign = one(self.conn.execute(Q.read_invoices, {"tenant": self.job.tenant}))
        self._log(LogEvent.ROWS_VISIBLE, tenant=self.job.tenant, visible=visible, foreign=foreign)

    def read_briefly(self):
        """Step 1 of a body that works outside any transaction: a short reading transaction, the tenant
        set locally in it. Returns the start time the finishing transaction records in ``job_runs``."""
        self.read_inherited()
        self.point("before-tenant")
        self.set_tenant()
        self.read_invoices()
        started = one(self.conn.execute("select clock_timestamp()"))[0]
        self.conn.commit()
        return started

    @contextmanager
    def finishing(self, started):
        """The article's short finishing transaction: the tenant set, the ``job_runs`` row inserted,
        then what the caller does inside (a design's fenced finish, an outbox row), committed together
        on leaving. An exception inside leaves it uncommitted (the pool or the caller rolls it back)."""
        if self.ctx.mode.autocommit:
            self.conn.execute("begin")
        self.set_tenant()
        self.insert_finished_run(started)
        yield
        self.conn.commit()

    def work_seconds(self) -> float:
        fault = self.job_fault()
        if fault is not None and fault.work_lease_factor is not None:
            return max(self.ctx.schedule.seconds(self.job.duration), fault.work_lease_factor * self.ctx.lease)
        return self.ctx.schedule.seconds(self.job.duration)

    def work(self) -> None:
        """Work for the job's duration, with the ``mid-work`` point halfway."""
        total = self.work_seconds()
        self.ctx.sleep(total / 2)
        self.point("mid-work")
        self.ctx.sleep(total / 2)

    def effect(self) -> None:
        """The external side effect: it happens in the world, whatever the database does next."""
        self._log(LogEvent.EFFECT)
        self.point("after-effect")

    # --- outcomes --------------------------------------------------------------------------------
    def finished(self) -> None:
        self._log(LogEvent.FINISHED, points=self.reached)
        self._ended()

    def fenced(self) -> None:
        """The finish matched no row: another worker holds the job now; our transaction rolled back."""
        self._log(LogEvent.FENCED, points=self.reached)
        self._ended()

    def failed(self, exc: BaseException) -> None:
        """The execution failed. Its record carries the time the body raised (:attr:`left`, when the worker
        loop set it), not the time of writing: the record is written after the pool's rollback, which may
        already have let another worker claim and start the job (a 0.00 s ``no-overlap`` seen under load)."""
        when = {"t": self.left[0], "wall": self.left[1]} if self.left is not None else {}
        self._log(LogEvent.FAILED, error=describe(exc), points=self.reached, **when)
        self._ended()


def inherited_tenant(me: str) -> sql.Composed:
    """The inherited-tenant read with the session marker *me* as a literal (see body.sql: why not a
    parameter)."""
    return sql.SQL(Q.inherited_tenant).format(me=sql.Literal(me))


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def worker_error(log: ExecLog, exc: BaseException) -> None:
    log.write(LogEvent.WORKER_ERROR, error=describe(exc), traceback=traceback.format_exc(limit=8))
