"""The worker context a design's loop gets in the forked worker: timing in real seconds, the pool,
the worker's own connections, the execution log, the dequeue budget, and the body's executions."""

from __future__ import annotations

import signal
import threading
import time

import psycopg

from ...core.events import LogEvent
from ...core.execlog import ExecLog, count_started, path_for
from ..tenant.modes import MODES, TenantMode
from . import statements
from .execution import STRIKE_SIGNAL, WAKE_SIGNAL, Claimed, Execution, WorkerSpec


def job_pool(mode: TenantMode, dsn: str, size: int, identity: str, configure):
    """The body's pool as every worker opens it: its tenant mode's, named after the worker."""
    return mode.pool(dsn, size=size, configure=configure, application_name=identity, name=f"{identity}-jobs")


class ConnectRecorder:
    """A pool's configure callback: a ``connect`` record per connection opened. Until :meth:`attach`
    gives it a log (a standby's pool opens before its run has a directory), the connections are kept,
    and written when it is attached, marked ``ahead``."""

    def __init__(self):
        self._log: ExecLog | None = None
        self._early: list[int] = []
        self._lock = threading.Lock()  # the pool's threads connect; attach runs in the main thread

    def __call__(self, conn: psycopg.Connection) -> None:
        with self._lock:
            if self._log is None:
                self._early.append(conn.info.backend_pid)
                return
        self._log.write(LogEvent.CONNECT, backend=conn.info.backend_pid)

    def early(self) -> list[int]:
        """The backend pids connected before :meth:`attach`."""
        with self._lock:
            return list(self._early)

    def attach(self, log: ExecLog) -> None:
        with self._lock:
            self._log = log
            early = self._early
            self._early = []
        for pid in early:
            log.write(LogEvent.CONNECT, backend=pid, ahead=True)


class WorkerContext:
    """What a design's worker loop gets: timing in real seconds, the pool, the log, the body."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.identity = spec.identity  # the harness's: its log, its lane, its sessions' application_name
        # The system's: what a hosted library is told as its worker / executor id (WorkerSpec.system_id)
        self.system_id = spec.system_id or spec.identity
        # A deploy's SIGTERM arrived (harness/supervisor/process.py installs the handler): claim nothing more
        self.terminating = False
        self._on_terminate: list = []  # what a hosted design's loop asked to be called then (when_terminated)
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
        self._ahead: tuple | None = None  # a pool a standby opened before the run (adopt)
        self.connects = ConnectRecorder()
        self.connects.attach(self.log)
        self._own: dict[str, psycopg.Connection] = {}
        self._strike_lock = threading.Lock()
        self.statements_seen: set[tuple[str, bool]] = set()  # (point, job-bound) logged once (statements.py)
        self.settings_seen: set[str] = set()  # custom settings the worker's own code set, logged once (same)

    # --- connections ---------------------------------------------------------------------------
    @property
    def worker_dsn(self) -> str:
        """The ordinary worker role's DSN (with the harness's client timeouts): what a hosted library's
        own connections use."""
        return self.spec.worker_dsn

    def pool_args(self) -> tuple:
        """What the body's pool is opened with: :func:`job_pool`'s arguments but its callback."""
        return (self.mode, self.spec.worker_dsn, self.schedule.pool_size, self.identity)

    def open_pool(self):
        """The body's pool, opened now -- or the one a standby opened before the run (:meth:`adopt`),
        when it was opened with what this one would be (a design may change its DSN first: the outbox's
        session limits); else that one is closed, unrecorded."""
        if self._ahead is not None:
            pool, connects, args = self._ahead
            self._ahead = None
            if args == self.pool_args():
                self.pool = pool
                self.connects = connects
                connects.attach(self.log)
                return pool
            pool.close()
        self.pool = job_pool(*self.pool_args(), self.connects)
        return self.pool

    def adopt(self, pool, connects: ConnectRecorder, args: tuple) -> None:
        """Let :meth:`open_pool` return *pool*, opened by this process before its run
        (``harness/supervisor/standby.py``) with *args* (:meth:`pool_args`) and *connects* as its
        configure callback: its connects are recorded from then on, the earlier ones marked ``ahead``."""
        self._ahead = (pool, connects, args)

    def own_connection(self, purpose: str) -> psycopg.Connection:
        """A connection of the worker's own, outside the pool (the heartbeat's), opened once and kept
        for the worker's life; a broken one is replaced on the next call."""
        conn = self._own.get(purpose)
        if conn is None or conn.closed or conn.broken:
            conn = self._own[purpose] = psycopg.connect(
                self.spec.worker_dsn, autocommit=True, application_name=f"{self.identity}/{purpose}")
            self.log.write(LogEvent.CONNECT, backend=conn.info.backend_pid, purpose=purpose)
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
        """Whether the worker may claim another job: not after a deploy's SIGTERM (:attr:`terminating`:
        the job in hand finishes, nothing more is claimed -- a hosted library's own stop, which the adapters
        call once this is false, is its graceful path), nor with the dequeue budget spent."""
        if self.terminating:
            return False
        return self.schedule.dequeues is None or self.dequeues < self.schedule.dequeues

    def when_terminated(self, fn) -> None:
        """Call *fn()* when a deploy's SIGTERM arrives (at once if it has): a hosted design's way to start
        its library's own stop from an idle wait, as its budget's end does after a job. Hazard: *fn* runs in
        the SIGTERM handler, between two bytecodes of the main thread: it may only set an event
        (``threading.Event.set``, ``loop.call_soon_threadsafe``), never log or wait."""
        self._on_terminate.append(fn)
        if self.terminating:
            fn()

    def terminated(self) -> None:
        """A deploy's SIGTERM: claim nothing more (:meth:`may_dequeue` false), call what
        :meth:`when_terminated` registered (the SIGTERM handler calls this)."""
        self.terminating = True
        for fn in self._on_terminate:
            fn()

    def budget_spent(self) -> bool:
        """Whether the schedule's dequeue budget is spent, as the worker's ``run_worker`` returns: by this
        process's count (:meth:`may_dequeue`: the body's executions here, and what a design counts itself)
        or, where the jobs ran in other processes of the worker (a library's children, a contract's
        client), by the ``started`` records its execution log holds. False without a budget. A return
        with it not spent is the worker stopping by itself (``harness/supervisor/process.py``).
        Hazard: a library that counts its own budget (django-tasks-db's ``--max-tasks``) and counts a
        task our body never ran stops before this count is spent: recorded as stopping by itself."""
        budget = self.schedule.dequeues
        if budget is None:
            return False
        if self.dequeues >= budget:
            return True
        try:
            return count_started(self.log.path.read_bytes()) >= budget
        except OSError:
            return False

    def sleep(self, seconds: float) -> None:
        if seconds > 0:  # time.sleep(0) is no free yield: ~0.1 ms measured, twice a zero-length job
            time.sleep(seconds)

    def idle_sleep(self, seconds: float) -> None:
        """:meth:`sleep`, ended sooner by the supervisor's :data:`WAKE_SIGNAL` (blocked in a forked
        worker, so it waits here; pending, it ends the next idle sleep at once)."""
        if seconds > 0:
            signal.sigtimedwait([WAKE_SIGNAL], seconds)

    def execution(self, conn: psycopg.Connection, job: Claimed) -> Execution:
        self.dequeues += 1
        statements.set_current(job)  # the job this thread's statements belong to from now on
        return Execution(self, conn, job)

    def execution_ended(self) -> None:
        statements.ended()  # its job stays current for the points; no more tenant-statement records

    def wait_for_supervisor(self, job: Claimed, point: str, backend: int | None) -> None:
        """Tell the supervisor we are at *point* and wait for its go. Hazard: the go is a process-wide
        signal; with several jobs at once (a hosted library's concurrency) one thread at a time waits,
        or another thread's wait could take this one's go."""
        # None: a statement of no job
        job_id = getattr(job, "id", None)
        attempt = getattr(job, "attempt", None)
        with self._strike_lock:
            self.log.write(LogEvent.POINT, job=job_id, attempt=attempt, point=point, backend=backend)
            if signal.sigtimedwait([STRIKE_SIGNAL], self.strike_wait) is None:
                self.log.write(LogEvent.POINT_TIMEOUT, job=job_id, attempt=attempt, point=point)
