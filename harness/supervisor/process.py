"""Worker processes: fork, die with the supervisor, reap, name the exit (rq's ``fork_work_horse``).

* :func:`spawn` forks one worker with an explicit ``fork`` context; the child sets its own process
  group, asks to die with us (``PR_SET_PDEATHSIG``), closes the janitor's pipe, and leaves only
  through ``os._exit``;
* :meth:`WorkerProcess.reaped` notices an exit; :func:`classify` turns an exit status into a named
  outcome ("exit 1", "killed by SIGKILL", or one the design declares in ``exit_outcomes``);
* a worker whose design's ``run_worker`` returns leaves with a code that says why (:func:`live`): after a
  deploy's SIGTERM (:data:`EXIT_GRACEFUL`, ``graceful``: its handler, :func:`_on_sigterm`, makes
  ``ctx.may_dequeue()`` false), its
  dequeue budget spent (:data:`EXIT_BUDGET`, outcome ``budget``) or not (:data:`EXIT_STOPPED_BY_ITSELF`,
  ``stopped-by-itself``, recorded with the last line of the worker's log): the reasons are
  ``core/events.py``'s :class:`~core.events.WorkerExitReason`;
* :func:`kill_all` ends what is left, by process group, stopped processes included.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, cast

from psycopg import conninfo

from ...core import logs, procs
from ...core.events import LogEvent, WorkerExitReason
from ...core.execlog import ExecLog, path_for
from ...core.history import WorkerExit
from ...faults.catalogue import EXIT_CRASH
from ...workers.body import statements
from ...workers.body.context import WorkerContext
from ...workers.body.execution import STRIKE_SIGNAL, WAKE_SIGNAL, WorkerSpec, worker_error
from ...workers.design import DesignRun
from . import leftovers

EXIT_BUDGET = 0  # run_worker returned with the dequeue budget spent
EXIT_WORKER_ERROR = 70
# run_worker returned with the budget not spent. Our own code, outside sysexits' 64-78 and the shells'
# 126-255. Hazard: a worker contract's client exiting 79 itself would read as this (contract.py passes a
# client's code on); no client does.
EXIT_STOPPED_BY_ITSELF = 79
EXIT_GRACEFUL = 80  # run_worker returned after a deploy's SIGTERM (the worker's graceful path); ours too
REAP_TIMEOUT = 10.0  # seconds to wait for a SIGKILLed worker to be reaped
OUTCOMES = {EXIT_BUDGET: WorkerExitReason.BUDGET, EXIT_STOPPED_BY_ITSELF: WorkerExitReason.STOPPED_BY_ITSELF,
            EXIT_GRACEFUL: WorkerExitReason.GRACEFUL, EXIT_CRASH: "exit 1", EXIT_WORKER_ERROR: "worker error"}
EXIT_CODES = {reason: code for code, reason in OUTCOMES.items() if isinstance(reason, WorkerExitReason)}
_FORK = multiprocessing.get_context("fork")


# Every worker connection's timeouts (real seconds): a worker cut off from the server must notice
# within seconds, not after TCP's 15-minute retransmission limit. connect_timeout bounds a connect;
# keepalives probe an idle connection after 5 s, every 2 s, 3 times; tcp_user_timeout ends one whose
# sent data has gone unacknowledged for 10 s (a partition). libpq's defaults have none of these.
CLIENT_TIMEOUTS = {"connect_timeout": "5", "keepalives": "1", "keepalives_idle": "5",
                   "keepalives_interval": "2", "keepalives_count": "3", "tcp_user_timeout": "10000"}


@functools.lru_cache(maxsize=64)  # per worker forked: ~0.3 ms of parsing a DSN measured, the same few DSNs
def client_timeouts(dsn: str) -> str:
    """*dsn* with :data:`CLIENT_TIMEOUTS` wherever it does not set them itself."""
    given = conninfo.conninfo_to_dict(dsn)
    return conninfo.make_conninfo(dsn, **{k: v for k, v in CLIENT_TIMEOUTS.items() if k not in given})


def classify(code: int | None, declared: Mapping[int, str] = {}) -> str:  # noqa: B006 (read only)
    """A child's exit status as a named outcome; *declared* are the design's own exit codes."""
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return {**declared, **OUTCOMES}.get(code, f"exit {code}")  # a design cannot rename ours


@dataclass
class WorkerProcess:
    """One forked worker. A restart is a new ``WorkerProcess`` with a new identity."""

    identity: str
    slot: int
    generation: int
    proc: multiprocessing.process.BaseProcess
    # {job: attempt} being executed, per its log, in start order (a hosted library may run several)
    current: dict[int, int | None] = field(default_factory=dict)
    job_pids: dict[int, int | None] = field(default_factory=dict)  # {job: the pid its execution logged from}
    exit: WorkerExit | None = None
    error: str | None = None  # the worker-error line it logged, if any
    # Its contract client's interpreter is starting (between the worker's contract-client record and the
    # client's client-start): the machine's time, not the design's -- the run's stall clock waits.
    client_starting: bool = False
    system_id: str = ""  # the identity it gives its system (WorkerSpec.system_id; "": its own identity)
    # A deploy (faults/supervisor.py): when it got SIGTERM, and whether the grace ran out (SIGKILL)
    terminated_at: float | None = None
    killed_after_grace: bool = False

    @property
    def system_identity(self) -> str:
        """What it gives its system as its worker / executor id."""
        return self.system_id or self.identity

    @property
    def running(self) -> bool:
        """Its process is still there (:attr:`alive` stays true until the loop records the exit)."""
        return self.alive and self.proc.exitcode is None

    @property
    def alive(self) -> bool:
        return self.exit is None

    @property
    def pid(self) -> int:
        pid = self.proc.pid
        if pid is None:  # never: spawn() starts every worker before it makes one
            raise RuntimeError(f"worker {self.identity} was never started")
        return pid

    @property
    def ended(self) -> WorkerExit:
        """Its exit, once recorded (every worker's is, once the run has shut its workers down)."""
        if self.exit is None:
            raise RuntimeError(f"worker {self.identity} has not exited")
        return self.exit

    def reaped(self) -> bool:
        """True once the process has ended (the exit is not yet recorded: see :meth:`record_exit`)."""
        return self.alive and self.proc.exitcode is not None

    def record_exit(self, now: float, *, by_harness: bool, declared: Mapping[int, str],
                    run_dir: Path | None = None) -> WorkerExit:
        """Its exit, named (:func:`classify`); one that stopped by itself with what its log ended with
        (``core/logs.py``'s :func:`~core.logs.last_lines`, from *run_dir*)."""
        code = self.proc.exitcode
        job, attempt = next(iter(self.current.items()), (None, None))  # the oldest job in flight
        outcome = classify(code, declared)
        if self.terminated_at is not None and not by_harness:  # a deploy's: the reason is the deploy's
            if self.killed_after_grace:
                outcome = WorkerExitReason.KILLED_AFTER_GRACE
            elif outcome in (WorkerExitReason.BUDGET, WorkerExitReason.STOPPED_BY_ITSELF):
                # run_worker returned after SIGTERM: a library's own handler, not ours, may have stopped it
                outcome = WorkerExitReason.GRACEFUL
        self.exit = WorkerExit(self.identity, self.pid, now, outcome,
                               code if code and code > 0 else None, -code if code and code < 0 else None,
                               by_harness, job, attempt, self.error)
        if self.exit.outcome == WorkerExitReason.STOPPED_BY_ITSELF and run_dir is not None:
            self.exit.detail, self.exit.last_warning = logs.last_lines(run_dir, self.identity)
        self.proc.join(0)
        return self.exit

    def signal_group(self, sig: int) -> None:
        if self.alive:
            procs.killpg(self.pid, sig)

    def wake(self) -> None:
        """End its idle sleep now (``workers/builtin/base.py``); a worker not asleep finds it pending at its
        next idle sleep, which then ends at once: one look sooner, nothing else."""
        try:
            os.kill(self.pid, WAKE_SIGNAL)
        except ProcessLookupError:
            pass

    def go(self, pid: int | None = None) -> None:
        """Let it go on from a strike point (the worker waits on :data:`STRIKE_SIGNAL`). *pid*: the
        process that logged the point -- the worker, or a child its library runs the job in (in the
        worker's process group: chancy's process executor). Hazard: a pid of some other process
        would get the signal; only pids of the worker's own group are signalled."""
        if self.alive:
            target = self.pid if pid is None else pid
            try:
                if target != self.pid and os.getpgid(target) != self.pid:
                    return  # not (or no longer) one of this worker's processes
                os.kill(target, STRIKE_SIGNAL)
            except ProcessLookupError:
                pass


def child_setup(close_fds: tuple[int, ...], parent: int, identity: str) -> None:
    """What every forked worker does first, after its logging: its own process group, death with the
    supervisor (a RuntimeError when that is already gone), the parent's pipes closed, default signal
    handlers, the strike and wake signals blocked, ``PGAPPNAME`` its identity."""
    os.setpgid(0, 0)
    if not procs.die_with_parent(signal.SIGKILL, parent):
        raise RuntimeError(f"the supervisor (pid {parent}) was gone before worker {identity} started")
    for fd in close_fds:  # the janitor's pipe: if we held it, the janitor would never see EOF
        try:
            os.close(fd)
        except OSError:
            pass
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    # A deploy's SIGTERM before the worker's context exists is kept for it (live: _on_sigterm from then on)
    signal.signal(signal.SIGTERM, _early_sigterm)
    # Blocked in every thread (threads inherit the mask): only sigtimedwait at a point takes it.
    signal.pthread_sigmask(signal.SIG_BLOCK, {STRIKE_SIGNAL, WAKE_SIGNAL})  # WAKE: the idle sleep's
    # A connection the design's own code opens names this worker unless the code names itself:
    # the supervisor's pg_stat_activity samples tell worker sessions by application_name.
    os.environ["PGAPPNAME"] = identity


def live(spec: WorkerSpec, design: DesignRun, ahead: tuple | None = None) -> NoReturn:
    """A set-up worker's life from its context on (*ahead*: a pool a standby opened and its recorder,
    ``WorkerContext.adopt``). It never returns: every path ends in ``os._exit``."""
    code = EXIT_WORKER_ERROR
    ctx = None
    try:
        leftovers.worker_tempdir(spec.run_dir, spec.identity)  # what its libraries leave goes with the run
        ctx = WorkerContext(spec)
        if ahead is not None:
            ctx.adopt(*ahead)
        # every statement the design sends is a strike point (workers/body/statements.py)
        statements.install(ctx)
        signal.signal(signal.SIGTERM, functools.partial(_on_sigterm, ctx))
        if _SIGTERM_EARLY[0]:
            ctx.terminated()
        ctx.log.write(LogEvent.WORKER_START)
        if design.handle.pool_first:  # a hosted design: its library's task borrows from it
            ctx.open_pool()
        try:
            design.run_worker(ctx)
        except SystemExit as exc:  # a library's own clean exit (django-tasks-db's SIGTERM handler, idle)
            if exc.code not in (None, 0):
                raise
        # It returned: at our asking (its budget spent), or by itself -- the design's code or its library
        # decided (procrastinate stops its worker when its listener fails: docs/findings/libraries.md).
        if ctx.terminating:
            reason = WorkerExitReason.GRACEFUL
        else:
            reason = WorkerExitReason.BUDGET if ctx.budget_spent() else WorkerExitReason.STOPPED_BY_ITSELF
        ctx.log.write(LogEvent.WORKER_EXIT, reason=reason)
        code = EXIT_CODES[reason]
    except BaseException as exc:
        record_failure(spec, ctx, exc)
    finally:
        os._exit(code)


_SIGTERM_EARLY = [False]  # a SIGTERM came before live() installed _on_sigterm


def _early_sigterm(signum: int, frame: object) -> None:
    _SIGTERM_EARLY[0] = True


def _on_sigterm(ctx: WorkerContext, signum: int, frame: object) -> None:
    """A deploy's SIGTERM: the worker claims nothing more (``ctx.may_dequeue()`` is false from now on); the
    job in hand goes on to its end, and the design's loop returns. Hazard: a signal handler runs between two
    bytecodes of the main thread, anywhere: it only sets a flag and the events a hosted design registered
    (``ctx.when_terminated``; no log write: the log's lock may be held)."""
    ctx.terminated()


def record_failure(spec: WorkerSpec, ctx: WorkerContext | None, exc: BaseException) -> None:
    """*exc* as the worker's ``worker-error`` record, in its log (made here if it has none yet)."""
    try:  # a failure before the context exists (its log, its pool) is recorded all the same
        worker_error(ctx.log if ctx is not None else ExecLog(path_for(spec.run_dir, spec.identity),
                                                              spec.identity), exc)
    except BaseException:
        pass


def _entry(spec: WorkerSpec, design: DesignRun, close_fds: tuple[int, ...], parent: int) -> None:
    """The child's whole life. It never returns: every path ends in ``os._exit``."""
    # Everything inherited is the parent's: the collector leaves it alone, so that a collection here
    # does not touch (and so copy) every page of the parent's heap -- a worker's start, its jobs and its
    # end (the pages it must free) all went slower by it. Objects made from here on are collected.
    gc.freeze()
    try:
        logs.worker_setup(spec.run_dir, spec.identity)  # before anything logs: no handler is shared
        child_setup(close_fds, parent, spec.identity)
    except BaseException as exc:
        record_failure(spec, None, exc)
        os._exit(EXIT_WORKER_ERROR)
    live(spec, design)


def fork(target: Callable[..., None], args: tuple, name: str) -> multiprocessing.process.BaseProcess:
    """Start ``target(*args)`` in a forked child, in its own process group when this returns (the child
    sets it too: whoever runs first wins)."""
    proc = _FORK.Process(target=target, args=args, name=name, daemon=False)
    proc.start()
    pid = cast(int, proc.pid)  # started
    try:
        os.setpgid(pid, pid)
    except (PermissionError, ProcessLookupError):
        pass
    return proc


def spawn(spec: WorkerSpec, design: DesignRun, *, slot: int, generation: int,
          close_fds: tuple[int, ...]) -> WorkerProcess:
    """Fork one worker running *design* per *spec*; it is in its own process group when this returns."""
    proc = fork(_entry, (spec, design, close_fds, os.getpid()), spec.identity)
    return WorkerProcess(spec.identity, slot, generation, proc, system_id=spec.system_id)


def kill_all(workers: list[WorkerProcess]) -> None:
    """:func:`signal_all`, then :func:`reap_all`."""
    signal_all(workers)
    reap_all(workers)


def signal_all(workers: list[WorkerProcess]) -> None:
    """SIGCONT then SIGKILL every live worker's group (a stopped process must not stay stopped)."""
    for w in workers:
        if w.alive:
            w.signal_group(signal.SIGCONT)
            w.signal_group(signal.SIGKILL)


def reap_all(workers: list[WorkerProcess]) -> None:
    """Wait for each live worker to end, bounded (a killed one: ~2 ms here, its memory freed)."""
    for w in workers:
        if w.alive:
            w.proc.join(REAP_TIMEOUT)


