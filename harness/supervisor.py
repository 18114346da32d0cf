"""The supervisor: forks workers, strikes from outside, restarts the dead, ends every run.

It runs one :class:`~harness.schedule.Schedule` against a prepared database:

* forks ``schedule.workers`` workers with an explicit ``fork`` context; each child sets its own
  process group, dies with us (``PR_SET_PDEATHSIG``), and leaves through ``os._exit``;
* tails the workers' execution logs; when an execution stops at a point the schedule watches,
  strikes (``faults/supervisor.py``) and lets it go on;
* classifies every exit ("exit 1", "killed by SIGKILL", "abandoned after max runtime") and
  restarts dead workers after the restart delay, within the restart budget, each restart a new
  identity;
* samples ``pg_stat_activity`` for the horizon property;
* ends when the queue is quiescent, when no worker is left, or at the deadline -- a wall-clock
  bound it enforces itself -- then kills what is left by process group.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import logging
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from faults.catalogue import CATALOGUE, EXIT_CRASH
from harness import execlog, logs, sqlfile
from harness.history import WorkerExit
from harness.schedule import Schedule
from workers.body import STRIKE_SIGNAL, WorkerContext, WorkerSpec, worker_error
from workers.heartbeat import EXIT_ABANDONED

Q = sqlfile.load(__file__, "supervisor.sql", "activity", "terminate", "hold_xid", "hold_snapshot")
log = logging.getLogger("pgjc.supervisor")

EXIT_DRAINED = 0
EXIT_WORKER_ERROR = 70
TICK = 0.01  # seconds between polls of the logs and the children (the faults wait for us: no race)
REAP_TIMEOUT = 10.0  # seconds to wait for a SIGKILLed worker to be reaped
STATEMENT_TIMEOUT_MS = 5000  # the supervisor's own queries can never hang a run
SETTLE_POLLS = 2  # quiescence must hold this many poll intervals in a row
HOLDER_APP = "pg-job-chaos/holder"
SAMPLES_PER_LEASE = 4  # pg_stat_activity samples per lease (see sample_every)
MIN_SAMPLE_EVERY = 0.02  # seconds: never sample faster than this
LOG_MERGE_EVERY = 0.1  # seconds between forwarding the workers' log lines (harness/logs.py)
PR_SET_PDEATHSIG = 1


@dataclass
class Stop:
    """A worker waiting at a strike point."""

    worker: str
    pid: int
    backend: int | None
    job: int
    attempt: int
    point: str


@dataclass
class Worker:
    identity: str
    slot: int
    generation: int
    proc: multiprocessing.process.BaseProcess
    current: tuple[int, int] | None = None  # (job, attempt) being executed, per its log
    exit: WorkerExit | None = None
    error: str | None = None

    @property
    def alive(self) -> bool:
        return self.exit is None


@dataclass
class SupervisorResult:
    records: list[dict]
    exits: list[WorkerExit]
    injected: list[dict]
    samples: list[dict]
    ended_by: str
    t0: float
    t1: float
    notes: list[str] = field(default_factory=list)


def classify(code: int | None) -> str:
    """A child's exit status as a named outcome."""
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return {EXIT_DRAINED: "drained", EXIT_CRASH: "exit 1", EXIT_ABANDONED: "abandoned after max runtime",
            EXIT_WORKER_ERROR: "worker error"}.get(code, f"exit {code}")


def _worker_entry(spec: WorkerSpec, design, close_fds: tuple[int, ...], parent: int) -> None:
    """The child's whole life. It never returns: every path ends in ``os._exit``."""
    code = EXIT_WORKER_ERROR
    ctx = None
    try:
        logs.worker_setup(spec.run_dir, spec.identity)  # before anything logs: no handler is shared
        os.setpgid(0, 0)
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(EXIT_WORKER_ERROR)
        for fd in close_fds:  # the janitor's pipe: if we held it, the janitor would never see EOF
            try:
                os.close(fd)
            except OSError:
                pass
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        # Blocked in every thread (threads inherit the mask): only sigtimedwait at a point takes it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {STRIKE_SIGNAL})
        ctx = WorkerContext(spec)
        ctx.log.write("worker-start")
        design.run_worker(ctx)
        ctx.log.write("worker-exit", reason="drained")
        code = EXIT_DRAINED
    except BaseException as exc:
        try:
            if ctx is not None:
                worker_error(ctx.log, exc)
        except BaseException:
            pass
    finally:
        os._exit(code)


class Supervisor:
    def __init__(self, schedule: Schedule, design, *, admin_dsn: str, worker_dsn: str, run_dir: Path,
                 janitor=None):
        self.s = schedule
        self.design = design
        self.admin_dsn, self.worker_dsn = admin_dsn, worker_dsn
        self.run_dir = Path(run_dir)
        self.janitor = janitor
        self.mp = multiprocessing.get_context("fork")
        self.workers: dict[str, Worker] = {}
        self.records: list[dict] = []
        self.injected: list[dict] = []
        self.samples: list[dict] = []
        self.notes: list[str] = []
        self._later: list = []
        self._seq = itertools.count()
        self._restarts_due: list[tuple[float, int, int]] = []  # (when, slot, generation)
        self._restarts_used = 0
        self._point_seen: dict[tuple[int, str], int] = {}
        self._holders: list[psycopg.Connection] = []
        self._janitor_keys: dict[str, str] = {}
        self.watch = frozenset((e.job, e.point) for e in schedule.events)
        delay = schedule.timing.restart_delay
        self.restart_delay = schedule.seconds(design.default_restart_delay if delay is None else delay)
        self.poll = schedule.seconds(schedule.timing.poll)
        # The horizon property flags a transaction older than half a lease; sampling four times a
        # lease sees any that lasts three quarters of one, and costs the workers little CPU.
        self.sample_every = max(MIN_SAMPLE_EVERY, schedule.seconds(schedule.timing.lease) / SAMPLES_PER_LEASE)

    # --- the API faults use -----------------------------------------------------------------------
    def record(self, fault: str, event, stop: Stop, **fields) -> None:
        entry = {"t": time.monotonic(), "fault": fault, "job": stop.job, "attempt": stop.attempt,
                 "worker": stop.worker, "point": stop.point, **fields}
        self.injected.append(entry)
        log.info("%s %s at job %s attempt %s (%s)", fault, stop.worker, stop.job, stop.attempt, stop.point)

    def event_seconds(self, event) -> float:
        """An event's duration in real seconds (default: two leases, "longer than the lease")."""
        d = event.duration if event.duration is not None else 2 * self.s.timing.lease
        return self.s.seconds(d)

    def signal_worker(self, identity: str, sig: int) -> None:
        w = self.workers[identity]
        if w.alive:
            try:
                os.killpg(w.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def go(self, identity: str) -> None:
        """Let a worker waiting at a point go on."""
        w = self.workers[identity]
        if w.alive:
            try:
                os.kill(w.proc.pid, STRIKE_SIGNAL)
            except ProcessLookupError:
                pass

    def later(self, delay: float, fn) -> None:
        heapq.heappush(self._later, (time.monotonic() + delay, next(self._seq), fn))

    def open_holder(self, variant: str) -> psycopg.Connection:
        conn = psycopg.connect(self.admin_dsn, application_name=HOLDER_APP, connect_timeout=5)
        if variant == "repeatable-read":
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.execute(Q.hold_snapshot)
        else:
            conn.execute(Q.hold_xid)
        self._holders.append(conn)
        return conn

    def close_holder(self, conn: psycopg.Connection) -> None:
        if conn in self._holders:
            self._holders.remove(conn)
        try:
            conn.rollback()
            conn.close()
        except psycopg.Error:
            pass

    def terminate_backend(self, pid: int) -> None:
        self._db("pg_terminate_backend", lambda: self.admin.execute(Q.terminate, {"pid": pid}), None)

    def _connect_admin(self) -> psycopg.Connection:
        return psycopg.connect(self.admin_dsn, autocommit=True, connect_timeout=5,
                               options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
                               application_name="pg-job-chaos/supervisor")

    def _db(self, what: str, fn, default):
        """Run one of the supervisor's own queries. A failure (timeout, lost connection) is a note in
        the history, never the end of the run; a broken connection is replaced."""
        try:
            return fn()
        except psycopg.Error as exc:
            self.notes.append(f"supervisor: {what} failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
            log.warning("%s", self.notes[-1])
            if self.admin.closed or self.admin.broken:
                try:
                    self.admin = self._connect_admin()
                except psycopg.Error:
                    pass
            return default

    # --- workers ------------------------------------------------------------------------------------
    def _spawn(self, slot: int, generation: int) -> None:
        identity = f"w{slot}.{generation}"
        spec = WorkerSpec(identity, self.s, self.worker_dsn, self.run_dir, self.watch)
        close = (self.janitor.fd,) if self.janitor is not None else ()
        proc = self.mp.Process(target=_worker_entry, args=(spec, self.design, close, os.getpid()),
                               name=identity, daemon=False)
        proc.start()
        try:
            os.setpgid(proc.pid, proc.pid)  # the child does it too: whoever runs first wins
        except (PermissionError, ProcessLookupError):
            pass
        if self.janitor is not None:
            self._janitor_keys[identity] = self.janitor.register("killpg", pgid=proc.pid)
        self.workers[identity] = Worker(identity, slot, generation, proc)
        log.debug("started %s (pid %s)", identity, proc.pid)

    def _reap(self, now: float) -> None:
        for w in self.workers.values():
            if w.alive and w.proc.exitcode is not None:
                self._exited(w, now, by_harness=False)

    def _exited(self, w: Worker, now: float, *, by_harness: bool) -> None:
        code = w.proc.exitcode
        job, attempt = w.current or (None, None)
        w.exit = WorkerExit(w.identity, w.proc.pid, now, classify(code), code if code and code > 0 else None,
                            -code if code and code < 0 else None, by_harness, job, attempt, w.error)
        w.proc.join(0)
        if self.janitor is not None and w.identity in self._janitor_keys:
            self.janitor.forget(self._janitor_keys.pop(w.identity))
        if by_harness:
            return
        log.info("%s ended: %s%s", w.identity, w.exit.outcome, f" during job {job}" if job else "")
        if w.exit.outcome != "drained":
            if self._restarts_used < self.s.restart_budget:
                self._restarts_used += 1
                self._restarts_due.append((now + self.restart_delay, w.slot, w.generation + 1))
            else:
                self.notes.append(f"restart budget ({self.s.restart_budget}) spent; {w.identity} not replaced")

    # --- the log ----------------------------------------------------------------------------------
    def _on_record(self, r: dict) -> None:
        w = self.workers.get(r.get("worker"))
        if w is None:
            return
        ev = r.get("event")
        if ev == "started":
            w.current = (r["job"], r.get("attempt"))
        elif ev in ("finished", "failed", "fenced"):
            w.current = None
        elif ev == "worker-error":
            w.error = r.get("error")
        elif ev == "point":
            self._strike(w, r)

    def _strike(self, w: Worker, r: dict) -> None:
        key = (r["job"], r["point"])
        n = self._point_seen[key] = self._point_seen.get(key, 0) + 1
        stop = Stop(w.identity, w.proc.pid, r.get("backend"), r["job"], r.get("attempt"), r["point"])
        due = [e for e in self.s.events if (e.job, e.point, e.occurrence) == (*key, n)]
        if not due:
            self.go(w.identity)
            return
        for e in sorted(due, key=lambda e: e.fault == "kill"):  # a kill last: nothing runs after it
            CATALOGUE[e.fault].inject(self, e, stop)

    # --- sampling and quiescence --------------------------------------------------------------------
    def _sample(self, now: float) -> None:
        names = set(self.workers)
        rows = self._db("sampling pg_stat_activity", lambda: self.admin.execute(Q.activity).fetchall(), [])
        for pid, app, state, xid, xmin, age in rows:
            base = (app or "").split("/", 1)[0]
            role = "holder" if app == HOLDER_APP else "worker" if base in names else "other"
            self.samples.append({"t": now, "pid": pid, "app": app, "role": role, "state": state,
                                 "xid": xid, "xmin": xmin, "xact_age": age})

    def _quiet(self) -> bool:
        if any(w.alive and w.current is not None for w in self.workers.values()):
            return False
        return self._db("the quiescence check", lambda: self.design.pending(self.admin), None) == 0

    # --- the run ------------------------------------------------------------------------------------
    def run(self) -> SupervisorResult:
        """Run the schedule to its end. Never raises for anything a worker does; always kills what it forked."""
        self.admin = self._connect_admin()
        tail = execlog.Tail(self.run_dir)
        merger = logs.Merger(self.run_dir)
        t0 = time.monotonic()
        deadline = t0 + self.s.seconds(self.s.timing.deadline)
        ended_by = "deadline"
        next_sample = next_check = next_merge = last_activity = t0
        stall = self.s.seconds(self.s.stall)
        quiet_since = None
        try:
            for slot in range(1, self.s.workers + 1):
                self._spawn(slot, 0)
            while True:
                now = time.monotonic()
                for r in tail.poll():
                    self.records.append(r)
                    self._on_record(r)
                    last_activity = now
                if now >= next_merge:
                    merger.poll()
                    next_merge = now + LOG_MERGE_EVERY
                self._reap(now)
                while self._later and self._later[0][0] <= now:
                    heapq.heappop(self._later)[2]()
                for due in [d for d in self._restarts_due if d[0] <= now]:
                    self._restarts_due.remove(due)
                    self._spawn(due[1], due[2])
                if now >= next_sample:
                    self._sample(now)
                    next_sample = now + self.sample_every
                if now >= next_check:
                    next_check = now + self.poll
                    if self._quiet():
                        quiet_since = quiet_since or now
                        if now - quiet_since >= SETTLE_POLLS * self.poll:
                            ended_by = "quiescent"
                            break
                    else:
                        quiet_since = None
                if not any(w.alive for w in self.workers.values()) and not self._restarts_due and not self._later:
                    ended_by = "workers-exhausted"
                    break
                if now - last_activity >= stall and not self._later:
                    ended_by = "stalled"
                    self.notes.append(f"nothing happened for {self.s.stall:g} article seconds")
                    break
                if now >= deadline:
                    ended_by = "deadline"
                    self.notes.append(f"deadline of {self.s.timing.deadline} article seconds reached")
                    break
                time.sleep(TICK)
        finally:
            self._shutdown()
            for r in tail.poll():
                self.records.append(r)
                self._on_record(r)
            merger.poll(final=True)
            self.admin.close()
        t1 = time.monotonic()
        log.info("run ended (%s) after %.2f s", ended_by, t1 - t0)
        return SupervisorResult(self.records, [w.exit for w in self.workers.values()], self.injected,
                                self.samples, ended_by, t0, t1, self.notes)

    def _shutdown(self) -> None:
        now = time.monotonic()
        self._reap(now)  # what died by itself is not "ended by the harness"
        for w in self.workers.values():
            if w.alive:
                for sig in (signal.SIGCONT, signal.SIGKILL):  # a stopped process must not stay stopped
                    try:
                        os.killpg(w.proc.pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
        for w in self.workers.values():
            if w.alive:
                w.proc.join(REAP_TIMEOUT)
                self._exited(w, now, by_harness=True)
        for conn in list(self._holders):
            self.close_holder(conn)
        self._later.clear()
