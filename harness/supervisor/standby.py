"""Standby workers: the next run's workers forked, and their pool's first connection opened, before that
run begins (issue 36 item 5: forking, starting and connecting were ~15 ms of a ~78 ms fault-free example).

A runner keeps one :class:`Standby` for its life. Each run's supervisor arms it for the next run
(:meth:`Standby.arm`) once its own first job has finished, or at its end: one standby per worker slot
of this run, forked, set up as every worker is (``process.child_setup``). Arming then, past the workers'
start, costs the run's jobs phase 1-2 ms of the 2 vCPUs (arming at the start, or at the first
``rows-visible``, measured worse). The standbys open their pool at once -- their sessions, named as
this run's workers are, are left out of its ``pg_stat_activity`` samples (:meth:`Standby.run_over`) --
or, when a fault of the run reaches every session, once it is over. The next run's supervisor takes,
per slot, the standby whose key is its own (:meth:`Standby.take`): the same design handle, DSN, tenant
mode and pool size; it sends the worker's spec, and the standby lives the worker's life
(``process.live``) with the pool it opened. Every standby not taken is ended before the run's workers
start (:meth:`Standby.release`): no session but the run's own is open while it runs. A restarted
worker is always forked afresh.

Only for a built-in design: a user's code may, before its pool opens, set what a connect reads
(``PGOPTIONS``, psycopg's adapters); a hosted library opens its own connections, at its own time.
What a standby does before it is taken is what every worker does first, and its pool's connect; it
logs nothing until then (psycopg_pool's lines of that connect are dropped). No statement of the design
is sent before the take: the design's code runs only with the run's spec, and when it opens its pool
(``WorkerContext.open_pool``) it gets the standby's only if that was opened with what it asks for --
else that one is closed unused and unrecorded (the outbox adds its session limits to the DSN); the
connects of a pool it gets are recorded then, marked ``ahead``.

Hazard: a taken standby's session was opened before the run's reset and enqueue (an idle session, no
transaction, no lock: the reset does not wait for it) -- what the pool's first connect sees of the
database (roles, settings of ``ALTER ROLE ... SET``) is what it was between the runs.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from ...core import logs
from ...core.schedule import Schedule
from ...faults.catalogue import entries
from ...workers.body.context import ConnectRecorder, job_pool
from ...workers.body.execution import WorkerSpec
from ...workers.design import DesignHandle
from ...workers.interface import Origin
from ...workers.tenant.modes import MODES
from . import process

CONNECT = "connect"
GO = "go"
SESSIONS_WAIT = 5.0  # seconds a told standby has to say its sessions (a connect's own timeout)
EXIT_RELEASED = 0  # a standby never taken leaves with it: it ran no job, and no history records its exit


@dataclass
class _Waiting:
    proc: BaseProcess
    link: Connection  # its end of their pipe
    key: tuple
    janitor_key: str | None
    told: float | None = None  # when it was told to connect (monotonic)
    sessions: tuple[int, ...] | None = None  # the backend pids of its pool, once it said


def eligible(handle: DesignHandle) -> bool:
    """Whether *handle*'s workers may be forked ahead: a built-in design, whose code before its pool opens
    is the harness's own (a user's may set what a connect reads first: ``PGOPTIONS``, adapters)."""
    return handle.origin is Origin.BUILTIN  # never hosted, never pool_first


def _key(handle: DesignHandle, dsn: str, schedule: Schedule) -> tuple:
    return (id(handle), dsn, schedule.tenant_mode, schedule.pool_size)


class Standby:
    def __init__(self, janitor=None):
        self.janitor = janitor
        self._owner = os.getpid()  # a forked process (a slot) inherits this object, not these children
        self._waiting: dict[int, _Waiting] = {}
        self.taken = self.forked = 0  # how many so far (the tests read them)

    def arm(self, handle: DesignHandle, dsn: str, schedule: Schedule, close_fds: tuple[int, ...]) -> None:
        """Fork a standby for each of *schedule*'s worker slots that has none, for a next run like this
        one (*dsn*: the workers' own, with the client timeouts), and let them connect now -- unless a
        fault of this run reaches every session (a restart, a failover, a partition): then once it is
        over (:meth:`connect`). *close_fds*: what the children must not hold (the janitor's pipe, this
        run's network)."""
        if os.getpid() != self._owner or not eligible(handle):
            return
        key = _key(handle, dsn, schedule)
        for slot in range(1, schedule.workers + 1):
            if slot in self._waiting:
                continue
            identity = f"w{slot}.0"
            theirs, link = multiprocessing.Pipe()
            close = close_fds + (link.fileno(),) + self._links()
            proc = process.fork(_entry, (theirs, handle, identity, dsn, schedule.tenant_mode,
                                         schedule.pool_size, close, os.getpid()), f"standby-{identity}")
            theirs.close()
            jkey = self.janitor.register("killpg", pgid=proc.pid) if self.janitor is not None else None
            self._waiting[slot] = _Waiting(proc, link, key, jkey)
            self.forked += 1
        if not any(f.breaks_every_session or f.needs_one_slot or f.needs_root_nftables or f.needs_replica
                   for f in entries(e.fault for e in schedule.events)):
            self.connect()

    def _links(self) -> tuple[int, ...]:
        """The other standbys' pipes (a child holding one would keep that standby from its EOF)."""
        return tuple(w.link.fileno() for w in self._waiting.values())

    def connect(self) -> None:
        """Let every waiting standby open its pool."""
        for slot, w in list(self._waiting.items()):
            if w.told is None:
                try:
                    w.link.send((CONNECT,))
                    w.told = time.monotonic()
                except OSError:  # it is gone: the next run forks that worker afresh
                    self._end(slot)

    def run_over(self, samples: list[dict], at: float) -> list[dict]:
        """The arming run is over (at *at*, monotonic; it samples no more): every standby may connect
        now; its *samples* without the sessions of those that connected sooner (not this run's)."""
        self.connect()
        ahead = self.sessions(before=at)
        return [s for s in samples if s["pid"] not in ahead]

    def sessions(self, before: float, wait: float = SESSIONS_WAIT) -> set[int]:
        """The backend pids of every session the standbys told to connect *before* (monotonic) have
        opened: the arming run leaves them out of its ``pg_stat_activity`` samples. Each says once its
        pool is open; one that has not said within *wait* seconds is ended (its session, if it had one,
        is gone with it)."""
        out: set[int] = set()
        for slot, w in list(self._waiting.items()):
            if w.told is None or w.told >= before:
                continue
            if w.sessions is None:
                try:
                    w.sessions = tuple(w.link.recv()) if w.link.poll(wait) else None
                except (EOFError, OSError):
                    w.sessions = None
                if w.sessions is None:
                    self._end(slot)
                    continue
            out.update(w.sessions)
        return out

    def take(self, slot: int, spec: WorkerSpec, handle: DesignHandle) -> tuple | None:
        """The standby of *slot*, made the worker *spec* (generation 0), as ``(WorkerProcess, janitor
        key)``; None when there is none or its key is not the run's (it is ended)."""
        w = self._waiting.get(slot)
        if w is None or os.getpid() != self._owner:
            return None
        if w.key != _key(handle, spec.worker_dsn, spec.schedule) or w.proc.exitcode is not None:
            self._end(slot)
            return None
        try:
            w.link.send((GO, spec))
        except OSError:
            self._end(slot)
            return None
        del self._waiting[slot]
        w.link.close()
        self.taken += 1
        return process.WorkerProcess(spec.identity, slot, 0, w.proc), w.janitor_key

    def release(self) -> None:
        """End every standby not taken."""
        for slot in list(self._waiting):
            self._end(slot)

    close = release

    def _end(self, slot: int) -> None:
        w = self._waiting.pop(slot)
        w.link.close()  # a standby reading its pipe leaves at the EOF; one connecting is killed
        proc = process.WorkerProcess(f"standby-w{slot}", slot, 0, w.proc)
        process.kill_all([proc])
        if self.janitor is not None and w.janitor_key is not None:
            self.janitor.forget(w.janitor_key)


def _entry(link, handle: DesignHandle, identity: str, dsn: str, mode: str, pool_size: int,
           close_fds: tuple[int, ...], parent: int) -> None:
    """A standby's life: set up, then open the pool when told, and become the worker when taken. It
    never returns."""
    gc.freeze()  # as process._entry: the parent's heap is left alone
    logs.drop_inherited()
    logging.getLogger().addHandler(logging.NullHandler())  # not Python's last resort: the parent's stderr
    try:
        process.child_setup(close_fds, parent, identity)
    except BaseException:
        os._exit(process.EXIT_WORKER_ERROR)  # not taken: the next run forks this worker afresh
    ahead = None
    while True:
        try:
            msg = link.recv()
        except (EOFError, OSError):  # released, or the runner gone
            os._exit(EXIT_RELEASED)
        if msg[0] == CONNECT and ahead is None:
            connects = ConnectRecorder()
            args = (MODES[mode], dsn, pool_size, identity)
            try:
                ahead = (job_pool(*args, connects), connects, args)
            except Exception:  # e.g. the server unreachable: the worker opens its own, as any worker
                ahead = None
            try:
                link.send(connects.early())
            except OSError:  # taken meanwhile: its spec waits in the pipe, the runner no longer listens
                pass
        elif msg[0] == GO:
            spec: WorkerSpec = msg[1]
            link.close()
            try:
                logs.worker_setup(spec.run_dir, spec.identity)
            except BaseException as exc:
                process.record_failure(spec, None, exc)
                os._exit(process.EXIT_WORKER_ERROR)
            process.live(spec, handle.for_run(spec.schedule), ahead)
