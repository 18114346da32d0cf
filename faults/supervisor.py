"""Supervisor faults: what the supervisor does when an execution reaches an event's point.

Each function gets the :class:`~faults.api.SupervisorAPI`, the schedule's
:class:`~core.schedule.Event` and the stopped worker (:class:`~faults.api.Stop`). It records
what it did (``sup.record``) and lets the worker go on (``sup.go``) unless the worker is gone.
"""

from __future__ import annotations

import signal

from ..core.schedule import Event
from .api import Stop, SupervisorAPI


def kill(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """SIGKILL, like the OOM killer: no handler, no rollback from the worker's side."""
    sup.record("kill", event, stop)
    sup.signal_worker(stop.worker, signal.SIGKILL)


def pause(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """SIGSTOP the worker (every thread, the heartbeat included) for longer than the lease, then SIGCONT."""
    duration = sup.event_seconds(event)
    sup.record("pause", event, stop, seconds=duration)
    sup.signal_worker(stop.worker, signal.SIGSTOP)

    def resume():
        sup.signal_worker(stop.worker, signal.SIGCONT)
        sup.record("resume", event, stop)
        sup.go(stop)

    sup.later(duration, resume)


def horizon(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """Another session holds a transaction (with an xid, or a REPEATABLE READ snapshot) for a stretch."""
    duration = sup.event_seconds(event)
    holder = sup.open_holder(event.variant)
    sup.record("horizon", event, stop, seconds=duration, variant=event.variant, holder=holder.backend_pid)

    def release():
        sup.close_holder(holder)
        sup.record("horizon-released", event, stop)

    sup.later(duration, release)
    sup.go(stop)


def terminate(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """pg_terminate_backend on the worker's session: its next statement fails."""
    sup.record("terminate", event, stop, backend=stop.backend)
    if stop.backend:
        sup.terminate_backend(stop.backend)
    sup.go(stop)


def restart(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The server stops in immediate mode while the job runs and starts again after the event's
    duration: every session breaks, uncommitted work is gone, committed work must survive."""
    duration = sup.event_seconds(event)
    sup.record("restart", event, stop, seconds=duration)
    sup.stop_server()

    def start():
        sup.start_server()
        sup.record("server-started", event, stop)

    sup.later(duration, start)
    sup.go(stop)


def latency(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The worker's traffic is slower (the schedule's ``timing.latency`` per chunk, either way) for the
    event's duration."""
    duration = sup.event_seconds(event)
    delay = sup.latency_seconds()
    sup.record("latency", event, stop, seconds=duration, delay=delay)
    sup.network(stop.worker, "latency", delay)

    def end():
        sup.network(stop.worker, "latency", 0.0)
        sup.record("latency-ended", event, stop)

    sup.later(duration, end)
    sup.go(stop)


def partition(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The worker's packets go nowhere (no RST, no FIN) for the event's duration, then it heals."""
    duration = sup.event_seconds(event)
    sup.record("partition", event, stop, seconds=duration)
    sup.network(stop.worker, "partition")

    def heal():
        sup.network(stop.worker, "heal")
        sup.record("healed", event, stop)

    sup.later(duration, heal)
    sup.go(stop)


def reset(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The worker's connections are cut with a TCP RST, mid-transaction."""
    sup.record("reset", event, stop)
    sup.network(stop.worker, "reset")
    sup.go(stop)


def lost_commit_reply(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The next commit on the worker's session at the point commits, and its reply never arrives: the
    proxy withholds it and cuts that connection with RST. Armed at the point, it strikes at the commit
    that follows (at ``before-finish``: the finishing transaction's). The worker's heartbeat and other
    connections are spared when the point's backend is one of the worker's connections to the proxy
    (behind a pooler the point logs the server's pid, so any connection of the worker's may be struck)."""
    sup.record("lost-commit-reply", event, stop, backend=stop.backend)
    sup.network(stop.worker, "lose-commit-reply", backend=stop.backend)
    sup.go(stop)
