"""The job body every design runs, and the worker context it runs in.

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
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from ..core import sqlfile
from ..core.execlog import ExecLog, path_for, started_count
from ..core.schedule import Schedule
from ..faults.catalogue import CATALOGUE
from . import statements
from .tenant import MODES

Q = sqlfile.load(__file__, "body.sql", "inherited_tenant", "server_pid", "set_tenant", "insert_run",
                 "insert_finished_run", "finish_run", "read_invoices")

STRIKE_SIGNAL = signal.SIGUSR1  # the supervisor's "go on" after it struck at a point


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
    watch: frozenset[tuple[int, str]] = frozenset()  # (job, point) pairs the supervisor strikes at
    tenant_setting: str = "app.tenant"  # the design's (HostedDesign.tenant_setting): its own tenant code's


class WorkerContext:
    """What a design's worker loop gets: timing in real seconds, the pool, the log, the body."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.identity = spec.identity
        self.schedule = s = spec.schedule
        self.mode = MODES[s.tenant_mode]
        self.log = ExecLog(path_for(spec.run_dir, spec.identity), spec.identity)
        self.lease = s.seconds(s.timing.lease)
        self.poll = s.seconds(s.timing.poll)
        self.heartbeat = s.seconds(s.heartbeat)
        self.max_runtime = s.seconds(s.timing.max_runtime)
        self.strike_wait = s.timing.strike_wait  # real seconds: a safety net, not part of the model
        self.dequeues = 0
        self.pool = None
        self._own: dict[str, psycopg.Connection] = {}
        self._strike_lock = threading.Lock()
        self.statements_seen: set[tuple[str, bool]] = set()  # (point, job-bound) logged once (statements.py)

    # --- connections ---------------------------------------------------------------------------
    @property
    def worker_dsn(self) -> str:
        """The ordinary worker role's DSN (with the harness's client timeouts): what a hosted library's
        own connections use."""
        return self.spec.worker_dsn

    def open_pool(self):
        self.pool = self.mode.pool(self.spec.worker_dsn, size=self.schedule.pool_size,
                                   configure=self._on_connect, application_name=self.identity,
                                   name=f"{self.identity}-jobs")
        return self.pool

    def _on_connect(self, conn: psycopg.Connection) -> None:
        self.log.write("connect", backend=conn.info.backend_pid)

    def own_connection(self, purpose: str) -> psycopg.Connection:
        """A connection of the worker's own, outside the pool (the heartbeat's), opened once and kept
        for the worker's life; a broken one is replaced on the next call."""
        conn = self._own.get(purpose)
        if conn is None or conn.closed or conn.broken:
            conn = self._own[purpose] = psycopg.connect(
                self.spec.worker_dsn, autocommit=True, application_name=f"{self.identity}/{purpose}")
            self.log.write("connect", backend=conn.info.backend_pid, purpose=purpose)
        return conn

    def close(self) -> None:
        """Close the pool and the worker's own connections (a forked worker need not: it ``os._exit`` s;
        an in-process loop, as ``run.py bench`` runs one, must)."""
        if self.pool is not None:
            self.pool.close()
        for conn in self._own.values():
            conn.close()
        self._own.clear()

    # --- the loop ---------------------------------------------------------------------------------
    def may_dequeue(self) -> bool:
        return self.schedule.dequeues is None or self.dequeues < self.schedule.dequeues

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def execution(self, conn: psycopg.Connection, job: Claimed) -> Execution:
        self.dequeues += 1
        statements.set_current(job)  # the job this thread's statements belong to from now on
        return Execution(self, conn, job)

    def wait_for_supervisor(self, job: Claimed, point: str, backend: int | None) -> None:
        """Tell the supervisor we are at *point* and wait for its go. Hazard: the go is a process-wide
        signal; with several jobs at once (a hosted library's concurrency) one thread at a time waits,
        or another thread's wait could take this one's go."""
        job_id, attempt = getattr(job, "id", None), getattr(job, "attempt", None)  # None: a statement of no job
        with self._strike_lock:
            self.log.write("point", job=job_id, attempt=attempt, point=point, backend=backend)
            if signal.sigtimedwait([STRIKE_SIGNAL], self.strike_wait) is None:
                self.log.write("point-timeout", job=job_id, attempt=attempt, point=point)


class Execution:
    """One execution of one job by this worker: the body's steps, each logged."""

    def __init__(self, ctx: WorkerContext, conn: psycopg.Connection, job: Claimed):
        self.ctx, self.conn, self.job = ctx, conn, job
        self.point_name: str | None = None
        self.reached: list[str] = []  # the points this execution passed, logged with its outcome
        self.run_id: int | None = None
        self.t_started = time.monotonic()
        self.nth: int | None = None  # which execution of the job in the run this is (see started)

    def _log(self, event: str, **fields) -> None:
        self.ctx.log.write(event, job=self.job.id, attempt=self.job.attempt, **fields)

    # --- steps -----------------------------------------------------------------------------------
    def started(self, **fields) -> None:
        self._log("started", tenant=self.job.tenant, fault=self.job.fault, **fields)
        if self.job.strikes is not None:  # the run's own count, whatever attempt the design believes
            self.nth = started_count(self.ctx.spec.run_dir, self.job.id)
            self._log("execution-count", nth=self.nth, strikes=self.job.strikes)

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
            self._log("server-session", point=name, backend=backend)
        if (self.job.id, name) in self.ctx.spec.watch:
            self.ctx.wait_for_supervisor(self.job, name, backend if self.ctx.schedule.pooler else self._backend())
        fault = self.job_fault()
        if fault is not None and fault.strike is not None and (self.job.point or fault.point) == name:
            self._log("fault", fault=fault.name, point=name)
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
        no server session anyway. In autocommit the pid is the session of that one statement."""
        status = self.conn.info.transaction_status
        if status == psycopg.pq.TransactionStatus.INTRANS or (
                status == psycopg.pq.TransactionStatus.IDLE and self.conn.autocommit):
            try:
                return self.conn.execute(Q.server_pid).fetchone()[0]
            except psycopg.Error:
                return None
        return None

    def read_inherited(self) -> None:
        me = f"{self.ctx.identity} {self.job.id} {self.job.attempt}"
        value, last, pid, _ = self.conn.execute(inherited_tenant(me)).fetchone()
        self._log("tenant-inherited", value=value, last=last, backend=pid)

    def set_tenant(self) -> None:
        if self.job.tenant is not None:
            self.conn.execute(Q.set_tenant, {"tenant": str(self.job.tenant), "local": self.ctx.mode.local})

    def insert_run(self) -> None:
        self.run_id = self.conn.execute(
            Q.insert_run, {"job": self.job.id, "worker": self.ctx.identity, "attempt": self.job.attempt}
        ).fetchone()[0]

    def insert_finished_run(self, started) -> None:
        self.conn.execute(Q.insert_finished_run, {"job": self.job.id, "worker": self.ctx.identity,
                                                  "attempt": self.job.attempt, "started": started})

    def finish_run(self) -> None:
        if self.run_id is not None:
            self.conn.execute(Q.finish_run, {"run": self.run_id})

    def read_invoices(self) -> None:
        visible, foreign = self.conn.execute(Q.read_invoices, {"tenant": self.job.tenant}).fetchone()
        self._log("rows-visible", tenant=self.job.tenant, visible=visible, foreign=foreign)

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
        self._log("effect")
        self.point("after-effect")

    # --- outcomes --------------------------------------------------------------------------------
    def finished(self) -> None:
        self._log("finished", points=self.reached)

    def fenced(self) -> None:
        """The finish matched no row: another worker holds the job now; our transaction rolled back."""
        self._log("fenced", points=self.reached)

    def failed(self, exc: BaseException) -> None:
        self._log("failed", error=describe(exc), points=self.reached)


def inherited_tenant(me: str) -> sql.Composed:
    """The inherited-tenant read with the session marker *me* as a literal (see body.sql: why not a
    parameter)."""
    return sql.SQL(Q.inherited_tenant).format(me=sql.Literal(me))


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def worker_error(log: ExecLog, exc: BaseException) -> None:
    log.write("worker-error", error=describe(exc), traceback=traceback.format_exc(limit=8))
