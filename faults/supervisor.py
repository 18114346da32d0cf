"""Supervisor faults: what the supervisor does when an execution reaches an event's point.

Each function gets the supervisor, the schedule's :class:`~harness.schedule.Event` and the
stopped worker (``stop``: identity, pid, backend pid). It records what it did (``sup.record``)
and lets the worker go on (``sup.go``) unless the worker is gone.
"""

from __future__ import annotations

import signal


def kill(sup, event, stop) -> None:
    """SIGKILL, like the OOM killer: no handler, no rollback from the worker's side."""
    sup.record("kill", event, stop)
    sup.signal_worker(stop.worker, signal.SIGKILL)


def pause(sup, event, stop) -> None:
    """SIGSTOP the worker (every thread, the heartbeat included) for longer than the lease, then SIGCONT."""
    duration = sup.event_seconds(event)
    sup.record("pause", event, stop, seconds=duration)
    sup.signal_worker(stop.worker, signal.SIGSTOP)

    def resume():
        sup.signal_worker(stop.worker, signal.SIGCONT)
        sup.record("resume", event, stop)
        sup.go(stop.worker)

    sup.later(duration, resume)


def horizon(sup, event, stop) -> None:
    """Another session holds a transaction (with an xid, or a REPEATABLE READ snapshot) for a stretch."""
    duration = sup.event_seconds(event)
    holder = sup.open_holder(event.variant)
    sup.record("horizon", event, stop, seconds=duration, variant=event.variant, holder=holder.info.backend_pid)

    def release():
        sup.close_holder(holder)
        sup.record("horizon-released", event, stop)

    sup.later(duration, release)
    sup.go(stop.worker)


def terminate(sup, event, stop) -> None:
    """pg_terminate_backend on the worker's session: its next statement fails."""
    sup.record("terminate", event, stop, backend=stop.backend)
    if stop.backend:
        sup.terminate_backend(stop.backend)
    sup.go(stop.worker)
