"""The supervisor's side of supervisor faults: :class:`Strikes` implements
:class:`faults.api.SupervisorAPI`, and decides which events strike when a worker reports a point.

A worker that reaches a watched point writes a ``point`` record and waits; :meth:`Strikes.at_point`
counts the occurrence, runs every event due there (one whose fault ``strikes_last``, a ``kill``, goes
last: nothing runs after it), and otherwise lets the worker go on at once.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping

from ...core.errors import HarnessError
from ...core.events import FaultStep
from ...core.schedule import Event, Schedule
from ...core.server import Cut, Janitor, Promotion, Replicated, Restartable
from ...faults.api import Holder as HolderAPI
from ...faults.api import Stop
from ...faults.catalogue import CATALOGUE
from ..net.network import Network
from .admin import Admin, Holder
from .process import WorkerProcess
from .server_state import ServerState

log = logging.getLogger("pgjc.supervisor")


class Strikes:
    """What faults may do to the run, and the timers they leave behind (``later``)."""

    def __init__(self, schedule: Schedule, workers: Mapping[str, WorkerProcess], admin: Admin, *,
                 server: Restartable | None = None, replica: Replicated | None = None,
                 janitor: Janitor | None = None, network: Network | None = None,
                 state: ServerState | None = None,
                 replace: Callable[[WorkerProcess, str], str] | None = None):
        """*server*: the back end the restart fault stops and starts (the replicated one's pair too);
        *replica*: the replicated back end's pair, which the failover faults drive; *network*: the run's
        proxies, when the schedule has network faults; *state*: the supervisor's record of the server,
        which the strikes keep (a new one when not given); *replace(old, system_id)*: the supervisor's fork of
        a deploy's replacement in *old*'s slot (system_id "": its own), returning its identity."""
        self._replace = replace
        self.server = server
        self.replica = replica
        self.janitor = janitor
        self.net = network
        self.state = state if state is not None else ServerState()
        self.s = schedule
        self.workers = workers
        self.admin = admin
        self.injected: list[dict] = []
        self._later: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._seen: dict[tuple[int, str], int] = {}
        self._holders: list[Holder] = []
        self.stopped: set[str] = set()  # workers a pause stopped (SIGSTOP) and has not resumed yet

    # --- faults.api.SupervisorAPI -------------------------------------------------------------------
    def record(self, step: FaultStep, event: Event, stop: Stop, **fields) -> None:
        name = FaultStep(step)  # a ValueError for a name the registry lacks: refused where it is written
        self.injected.append({"t": time.monotonic(), "fault": name, "job": stop.job, "attempt": stop.attempt,
                              "worker": stop.worker, "point": stop.point, **fields})
        log.info("%s %s at job %s attempt %s (%s)", name, stop.worker, stop.job, stop.attempt, stop.point)

    def event_seconds(self, event: Event) -> float:
        d = event.duration if event.duration is not None else 2 * self.s.timing.lease
        return self.s.seconds(d)

    def signal_worker(self, worker: str, sig: int) -> None:
        if sig == signal.SIGSTOP:
            self.stopped.add(worker)
        elif sig == signal.SIGCONT:
            self.stopped.discard(worker)
        self.workers[worker].signal_group(sig)

    def go(self, stop: Stop) -> None:
        self.workers[stop.worker].go(stop.pid)

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._later, (time.monotonic() + delay, next(self._seq), fn))

    def grace_seconds(self) -> float:
        return self.s.seconds(self.s.grace)

    def live_workers(self) -> tuple[str, ...]:
        return tuple(n for n, w in self.workers.items() if w.running and w.terminated_at is None)

    def worker_alive(self, worker: str) -> bool:
        # Hazard: its exit recorded (``alive``), not its process gone (``running``): a process that dies
        # between the loop's reap and its due strikes would otherwise get a drain's replacement dated
        # before the exit the next pass records.
        w = self.workers.get(worker)
        return w is not None and w.alive

    def terminate_worker(self, worker: str) -> dict[int, int | None]:
        w = self.workers[worker]
        if not w.running:
            return {}
        w.terminated_at = time.monotonic()
        try:  # its own process only, as Kubernetes signals a container's first process
            os.kill(w.pid, signal.SIGTERM)
        except ProcessLookupError:
            return {}
        w.wake()  # out of its idle sleep now: it looks at the flag SIGTERM set and leaves
        return dict(w.current)

    def kill_after_grace(self, worker: str) -> bool:
        w = self.workers[worker]
        if not w.running:
            return False
        w.killed_after_grace = True
        w.signal_group(signal.SIGKILL)  # the whole group, as a container's processes all go
        return True

    def start_replacement(self, worker: str, *, same_identity: bool) -> str:
        if self._replace is None:
            raise HarnessError("a deploy without the supervisor's replacement (Strikes made without replace)")
        old = self.workers[worker]
        return self._replace(old, old.system_identity if same_identity else "")

    def system_identity(self, worker: str) -> str:
        return self.workers[worker].system_identity

    def open_holder(self, variant: str) -> Holder:
        holder = Holder(self.admin.dsn, variant)
        self._holders.append(holder)
        return holder

    def close_holder(self, holder: HolderAPI) -> None:
        if not isinstance(holder, Holder):  # a fault closes only what open_holder gave it
            raise TypeError(f"not a holder of this supervisor's: {holder!r}")
        if holder in self._holders:
            self._holders.remove(holder)
        holder.close()

    def terminate_backend(self, pid: int) -> None:
        self.admin.terminate(pid)

    def latency_seconds(self) -> float:
        return self.s.seconds(self.s.timing.latency)

    def _network(self, worker: str) -> tuple[Network, int]:
        if self.net is None:
            raise HarnessError("a network fault without the run's network (the schedule names none?)")
        return self.net, self.workers[worker].slot

    def add_latency(self, worker: str, seconds: float) -> None:
        net, slot = self._network(worker)
        net.latency(slot, seconds)

    def reset_connections(self, worker: str) -> None:
        net, slot = self._network(worker)
        net.reset(slot)

    def partition(self, worker: str) -> None:
        net, slot = self._network(worker)
        net.partition(slot)

    def heal(self, worker: str) -> None:
        net, slot = self._network(worker)
        net.heal(slot)

    def lose_commit_reply(self, worker: str, backend: int | None) -> None:
        net, slot = self._network(worker)
        net.lose_commit_reply(slot, backend)

    def stop_server(self) -> None:
        if self.server is None:  # the command line refuses restart without a local server; a schedule
            raise HarnessError("the restart fault needs the local server (--postgres local)")
        self.state.stopping(time.monotonic())
        self.server.crash(self.janitor)

    def start_server(self) -> None:
        if not self.state.down:
            return
        if self.server is not None:  # always, once down: a stop needs it, and a cut's pair is it
            self.server.start_again(self.janitor)
        self.state.started(time.monotonic())
        self.admin.reconnect()

    def _replica(self) -> Replicated:
        if self.replica is None:
            raise HarnessError("the failover fault needs the replicated back end (--replica async|sync)")
        return self.replica

    def cut_standby(self) -> Cut | None:
        cut = self._replica().cut_standby()
        if cut is not None:
            # a failover is under way: like a stopped server, nothing is quiet until the promotion
            self.state.failing_over()
        return cut

    def arm_switchover(self) -> bool:
        return self._replica().arm_switchover()

    def cancel_commit_waits(self) -> tuple[int, ...]:
        return self._replica().cancel_commit_waits()

    def last_promotion(self) -> Promotion | None:
        return self._replica().last_promotion()

    def demote_primary(self) -> Promotion | None:
        self.state.failing_over()  # nothing is quiet until the promotion (it returns promoted)
        try:
            promotion = self._replica().demote_in_place()
        finally:
            self.state.started(time.monotonic())
        if promotion is not None:
            self.admin.reconnect()  # its session was on the old node: sample the new primary
        return promotion

    # --- the supervisor's side ----------------------------------------------------------------------
    def at_point(self, w: WorkerProcess, r: dict) -> None:
        """A ``point`` record: strike what is due at this occurrence, else let the worker go on."""
        key = (r["job"], r["point"])
        n = self._seen[key] = self._seen.get(key, 0) + 1  # counted even for a worker already gone
        if not w.alive:
            return
        due = [e for e in self.s.events if (e.job, e.point, e.occurrence) == (*key, n)]
        waiter = r.get("pid", w.pid)  # the process that logged the point waits for the go
        if not due:
            w.go(waiter)
            return
        stop = Stop(w.identity, waiter, r.get("backend"), r["job"], r.get("attempt"), r["point"])
        for e in sorted(due, key=lambda e: CATALOGUE[e.fault].strikes_last):  # a kill: nothing runs after it
            inject = CATALOGUE[e.fault].inject
            if inject is None:  # never: a schedule's events are supervisor faults (faults.check_schedule)
                raise HarnessError(f"event {e.fault!r} is not a supervisor fault")
            inject(self, e, stop)

    def run_due(self, now: float) -> None:
        while self._later and self._later[0][0] <= now:
            heapq.heappop(self._later)[2]()

    @property
    def pending(self) -> bool:
        """Timers still to run: the run is not over while a pause waits to resume."""
        return bool(self._later)

    def close(self) -> None:
        """Release every holder; drop the timers (the workers they would touch are gone); a server
        still stopped by a restart starts again, so the run's tables can be read."""
        for holder in list(self._holders):
            self.close_holder(holder)
        self._later.clear()
        self.start_server()
