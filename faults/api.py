"""What the supervisor offers a supervisor fault: the typed interface faults are written against.

The supervisor (``harness.supervisor``) implements :class:`SupervisorAPI`; a fault in
``faults/supervisor.py`` gets it, the schedule's :class:`~core.schedule.Event` and the
:class:`Stop` (the worker waiting at the event's point). This layer defines the interface and
the supervisor depends on it, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..core.schedule import Event

# What :meth:`SupervisorAPI.network` takes (a catalogue entry's ``network`` is one of them); any other
# action is an error, never a silent no-op.
NETWORK_ACTIONS = ("latency", "reset", "partition", "heal", "lose-commit-reply")


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

    def record(self, fault: str, event: Event, stop: Stop, **fields) -> None:
        """Add one entry to the history's ``injected`` list (and the supervisor's log)."""

    def event_seconds(self, event: Event) -> float:
        """The event's duration in real seconds (default: two leases, "longer than the lease")."""

    def signal_worker(self, worker: str, sig: int) -> None:
        """Send *sig* to the worker's whole process group (its threads and children)."""

    def go(self, stop: Stop) -> None:
        """Let the process waiting at *stop* go on (``stop.pid``: the worker, or a process of the
        library's own the job runs in, e.g. chancy's process executor's child)."""

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        """Call *fn* from the supervisor's loop after *delay* real seconds (before the run ends)."""

    def open_holder(self, variant: str) -> Holder:
        """Open a session holding a transaction: ``xid`` (it wrote) or ``repeatable-read`` (a snapshot)."""

    def close_holder(self, holder: Holder) -> None:
        """End a holder's transaction and session."""

    def terminate_backend(self, pid: int) -> None:
        """``pg_terminate_backend`` on a worker's session."""

    def latency_seconds(self) -> float:
        """The latency fault's delay per chunk in real seconds (the schedule's ``timing.latency``)."""

    def network(self, worker: str, action: str, seconds: float = 0.0, *, backend: int | None = None) -> None:
        """The worker's traffic: ``latency`` (add *seconds* to every chunk either way; 0 ends it),
        ``reset`` (cut its connections with RST), ``partition`` (drop its packets: silence),
        ``heal`` (end the partition), ``lose-commit-reply`` (withhold the reply to the next commit on the
        connection of *backend* -- on any of the worker's connections when *backend* is None or not one of
        them -- and cut that connection with RST): :data:`NETWORK_ACTIONS`. Another action is a
        ``HarnessError``."""

    def stop_server(self) -> None:
        """Stop the server in immediate mode, as a crash does: every session breaks. Until
        :meth:`start_server`, the supervisor neither samples nor checks for quiescence."""

    def start_server(self) -> None:
        """Start the stopped server again (crash recovery) and reconnect the supervisor's session.
        On the replicated back end the stop is the primary's and the start promotes the standby."""

    def replica(self, action: str) -> dict:
        """The replicated back end's standby (``harness.postgres.replica.Pair.action``): ``cut`` its WAL
        receiver, arm a ``switchover``, ``cancel-waits`` (commits waiting for it), ``last-promotion``.
        A ``HarnessError`` on a run without one."""
