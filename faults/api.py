"""What the supervisor offers a supervisor fault: the typed interface faults are written against.

The supervisor (``harness.supervisor``) implements :class:`SupervisorAPI`; a fault in
``faults/supervisor.py`` gets it, the schedule's :class:`~core.schedule.Event` and the
:class:`Stop` (the worker waiting at the event's point). This layer defines the interface and
the supervisor depends on it, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from ..core.events import FaultStep
from ..core.schedule import Event
from ..core.server import Cut, Promotion


class NetworkAction(StrEnum):
    """What the network faults do to a worker's traffic, each a member of :class:`SupervisorAPI`: a
    catalogue entry's ``network`` names the one it strikes with first (a member is its string)."""

    LATENCY = "latency"  # SupervisorAPI.add_latency
    RESET = "reset"  # SupervisorAPI.reset_connections
    PARTITION = "partition"  # SupervisorAPI.partition (and heal, its end)
    HEAL = "heal"  # SupervisorAPI.heal
    LOSE_COMMIT_REPLY = "lose-commit-reply"  # SupervisorAPI.lose_commit_reply


NETWORK_ACTIONS: tuple[NetworkAction, ...] = tuple(NetworkAction)


@dataclass(frozen=True)
class Stop:
    """A worker waiting at a strike point: who, which process and session, which execution, where."""

    worker: str
    pid: int  # the process that waits at the point (the worker's own, or its library's executor child)
    backend: int | None  # the worker's PostgreSQL session at the point (None: not connected)
    job: int
    attempt: int | None
    point: str


class Holder(Protocol):
    """An open session of the supervisor's that holds a transaction (the horizon fault)."""

    @property
    def backend_pid(self) -> int: ...


class SupervisorAPI(Protocol):
    """The supervisor's side of a strike. Every method is safe on a worker that is already gone."""

    def record(self, step: FaultStep, event: Event, stop: Stop, **fields) -> None:
        """Add one entry to the history's ``injected`` list (and the supervisor's log), its ``fault``
        *step*: a registered name (``core/events.py``); another is a ``ValueError`` here."""

    def event_seconds(self, event: Event) -> float:
        """The event's duration in real seconds (default: two leases, "longer than the lease")."""

    def signal_worker(self, worker: str, sig: int) -> None:
        """Send *sig* to the worker's whole process group (its threads and children)."""

    def go(self, stop: Stop) -> None:
        """Let the process waiting at *stop* go on (``stop.pid``: the worker, or a process of the
        library's own the job runs in, e.g. chancy's process executor's child)."""

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        """Call *fn* from the supervisor's loop after *delay* real seconds (before the run ends)."""

    # The deploy fault (issue 47)
    def grace_seconds(self) -> float:
        """A deploy's grace in real seconds (the schedule's ``timing.grace``, else the default, scaled)."""

    def live_workers(self) -> tuple[str, ...]:
        """The workers alive now that no deploy has signalled yet, in start order."""

    def worker_alive(self, worker: str) -> bool:
        """Whether *worker*'s process is still there (its exit not yet reaped counts as there)."""

    def terminate_worker(self, worker: str) -> dict[int, int | None]:
        """SIGTERM to the worker's own process (as Kubernetes signals a container's first process), and
        its idle sleep woken; from now on its exit is the deploy's (``graceful``, or ``killed-after-grace``
        after :meth:`kill_after_grace`) and the supervisor does not replace it. Returns the jobs in its
        hands ``{job: attempt}``, per its log."""

    def kill_after_grace(self, worker: str) -> bool:
        """SIGKILL to the group of a terminated worker still there (its exit: ``killed-after-grace``);
        False when it was gone."""

    def start_replacement(self, worker: str, *, same_identity: bool) -> str:
        """Fork a replacement of *worker* in its slot, with a new harness identity (log, lane); with
        *same_identity* it carries *worker*'s system identity (what a library uses as worker / executor
        id), else its own. Returns the replacement's harness identity."""

    def system_identity(self, worker: str) -> str:
        """The identity *worker* gives its system (the library's worker / executor id)."""

    def open_holder(self, variant: str) -> Holder:
        """Open a session holding a transaction: ``xid`` (it wrote) or ``repeatable-read`` (a snapshot)."""

    def close_holder(self, holder: Holder) -> None:
        """End a holder's transaction and session."""

    def terminate_backend(self, pid: int) -> None:
        """``pg_terminate_backend`` on a worker's session."""

    def latency_seconds(self) -> float:
        """The latency fault's delay per chunk in real seconds (the schedule's ``timing.latency``)."""

    # The network faults (a per-worker proxy, harness.net): a ``HarnessError`` on a run without them.
    def add_latency(self, worker: str, seconds: float) -> None:
        """Add *seconds* to every chunk of the worker's traffic, either way; 0 ends it."""

    def reset_connections(self, worker: str) -> None:
        """Cut the worker's connections with a TCP RST."""

    def partition(self, worker: str) -> None:
        """Drop the worker's packets (silence: no RST, no FIN) until :meth:`heal`."""

    def heal(self, worker: str) -> None:
        """End the worker's partition."""

    def lose_commit_reply(self, worker: str, backend: int | None) -> None:
        """Withhold the reply to the next commit on the connection of *backend* -- on any of the worker's
        connections when *backend* is None or not one of them -- and cut that connection with RST."""

    def stop_server(self) -> None:
        """Stop the server in immediate mode, as a crash does: every session breaks. Until
        :meth:`start_server`, the supervisor neither samples nor checks for quiescence."""

    def start_server(self) -> None:
        """Start the stopped server again (crash recovery) and reconnect the supervisor's session.
        On the replicated back end the stop is the primary's and the start promotes the standby."""

    # The replicated back end (core.server.Replicated): a ``HarnessError`` on a run without one.
    def cut_standby(self) -> Cut | None:
        """Cut the standby's WAL receiver (it keeps what it has); until the promotion, the supervisor
        neither samples nor checks for quiescence. None: no standby left (a second failover)."""

    def arm_switchover(self) -> bool:
        """The next :meth:`stop_server` is a clean stop: the standby receives all WAL first. False: no
        standby left."""

    def cancel_commit_waits(self) -> tuple[int, ...]:
        """Cancel every commit waiting for the standby; the backends cancelled."""

    def last_promotion(self) -> Promotion | None:
        """The newest promotion of the standby (its seconds); None before the first."""

    def demote_primary(self) -> Promotion | None:
        """Promote the standby, the old primary left up and read-only with its sessions open (the
        supervisor's own session reconnects to the new primary). None: no standby left."""
