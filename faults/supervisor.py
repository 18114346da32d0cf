"""Supervisor faults: what the supervisor does when an execution reaches an event's point.

Each function gets the :class:`~faults.api.SupervisorAPI`, the schedule's
:class:`~core.schedule.Event` and the stopped worker (:class:`~faults.api.Stop`). It records
what it did (``sup.record``: a :class:`~core.events.FaultStep`) and lets the worker go on
(``sup.go``) unless the worker is gone.
"""

from __future__ import annotations

import dataclasses
import signal

from ..core.events import FaultStep
from ..core.schedule import Event
from .api import Stop, SupervisorAPI


def kill(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """SIGKILL, like the OOM killer: no handler, no rollback from the worker's side."""
    sup.record(FaultStep.KILL, event, stop)
    sup.signal_worker(stop.worker, signal.SIGKILL)


def pause(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """SIGSTOP the worker (every thread, the heartbeat included) for longer than the lease, then SIGCONT."""
    duration = sup.event_seconds(event)
    sup.record(FaultStep.PAUSE, event, stop, seconds=duration)
    sup.signal_worker(stop.worker, signal.SIGSTOP)

    def resume():
        sup.signal_worker(stop.worker, signal.SIGCONT)
        sup.record(FaultStep.RESUME, event, stop)
        sup.go(stop)

    sup.later(duration, resume)


def horizon(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """Another session holds a transaction (with an xid, or a REPEATABLE READ snapshot) for a stretch."""
    duration = sup.event_seconds(event)
    holder = sup.open_holder(event.variant)
    sup.record(FaultStep.HORIZON, event, stop, seconds=duration, variant=event.variant,
               holder=holder.backend_pid)

    def release():
        sup.close_holder(holder)
        sup.record(FaultStep.HORIZON_RELEASED, event, stop)

    sup.later(duration, release)
    sup.go(stop)


def terminate(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """pg_terminate_backend on the worker's session: its next statement fails."""
    sup.record(FaultStep.TERMINATE, event, stop, backend=stop.backend)
    if stop.backend:
        sup.terminate_backend(stop.backend)
    sup.go(stop)


def restart(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The server stops in immediate mode while the job runs and starts again after the event's
    duration: every session breaks, uncommitted work is gone, committed work must survive."""
    duration = sup.event_seconds(event)
    sup.record(FaultStep.RESTART, event, stop, seconds=duration)
    sup.stop_server()

    def start():
        sup.start_server()
        sup.record(FaultStep.SERVER_STARTED, event, stop)

    sup.later(duration, start)
    sup.go(stop)


def latency(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The worker's traffic is slower (the schedule's ``timing.latency`` per chunk, either way) for the
    event's duration."""
    duration = sup.event_seconds(event)
    delay = sup.latency_seconds()
    sup.record(FaultStep.LATENCY, event, stop, seconds=duration, delay=delay)
    sup.add_latency(stop.worker, delay)

    def end():
        sup.add_latency(stop.worker, 0.0)
        sup.record(FaultStep.LATENCY_ENDED, event, stop)

    sup.later(duration, end)
    sup.go(stop)


def partition(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The worker's packets go nowhere (no RST, no FIN) for the event's duration, then it heals."""
    duration = sup.event_seconds(event)
    sup.record(FaultStep.PARTITION, event, stop, seconds=duration)
    sup.partition(stop.worker)

    def heal():
        sup.heal(stop.worker)
        sup.record(FaultStep.HEALED, event, stop)

    sup.later(duration, heal)
    sup.go(stop)


def reset(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The worker's connections are cut with a TCP RST, mid-transaction."""
    sup.record(FaultStep.RESET, event, stop)
    sup.reset_connections(stop.worker)
    sup.go(stop)


def lost_commit_reply(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The next commit on the worker's session at the point commits, and its reply never arrives: the
    proxy withholds it and cuts that connection with RST. Armed at the point, it strikes at the commit
    that follows (at ``before-finish``: the finishing transaction's). The worker's heartbeat and other
    connections are spared when the point's backend is one of the worker's connections to the proxy
    (behind a pooler the point logs the server's pid, so any connection of the worker's may be struck)."""
    sup.record(FaultStep.LOST_COMMIT_REPLY, event, stop, backend=stop.backend)
    sup.lose_commit_reply(stop.worker, stop.backend)
    sup.go(stop)


# The deploy fault's variants: how the replacement starts, and -- with ALL -- every worker deployed at once.
ROLLING = "rolling"  # at once, beside the old worker, with a new system identity
SAME_IDENTITY = "same-identity"  # at once, with the old worker's system identity (a StatefulSet pod's name)
DRAIN = "drain"  # once the old worker has exited (Recreate)
ALL = "-all"  # a variant's suffix: every live worker gets SIGTERM, not only the one at the point
DEPLOY_VARIANTS = (ROLLING, SAME_IDENTITY, DRAIN, ROLLING + ALL, SAME_IDENTITY + ALL, DRAIN + ALL)
DRAIN_CHECK = 0.01  # seconds between looks at whether a draining worker has exited (the loop's tick)


def deploy(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """A deploy as production does one: SIGTERM to the worker at the point (with ``-all``: to every live
    worker), the worker's own graceful path within the grace (``--grace``, scaled; default Kubernetes'
    30 s), SIGKILL to whatever is still there when the grace ends, and a replacement per the variant:
    ``rolling`` and ``same-identity`` at once (beside the old worker, which finishes its job meanwhile),
    ``drain`` once the old one has exited. Each step is an injected record: ``deploy`` (SIGTERM, with the
    grace, the variant and the jobs in the worker's hands), ``grace-kill``, ``replacement-started``."""
    if stop.worker not in sup.live_workers():
        # Hazard: a second deploy event reaching a worker already in its grace would be a second SIGTERM,
        # which Kubernetes never sends a terminating pod and which some libraries take as "force" (django-
        # tasks-db's db_worker: "press Ctrl+C again to force", sys.exit(1) in the task): ours, not theirs.
        sup.record(FaultStep.DEPLOY_SKIPPED, event, stop, variant=event.variant,
                   detail="already terminating: no second SIGTERM")
        sup.go(stop)
        return
    grace = sup.grace_seconds()
    everyone = event.variant.endswith(ALL)
    how = event.variant.removesuffix(ALL)
    targets = [stop.worker] + ([w for w in sup.live_workers() if w != stop.worker] if everyone else [])
    signalled = []  # every SIGTERM first, then the replacements (a fork each: ~20 ms)
    for worker in targets:
        in_hand = sup.terminate_worker(worker)
        elsewhere = {}  # another worker's record names the first job in its hands (job None: none)
        if worker == stop.worker:
            at = stop
        else:
            at = dataclasses.replace(stop, worker=worker, point="(elsewhere)")
            job = next(iter(in_hand), None)
            elsewhere = {"job": job, "attempt": in_hand.get(job) if job is not None else None}
        sup.record(FaultStep.DEPLOY, event, at, seconds=grace, variant=event.variant,
                   in_hand=[[job, attempt] for job, attempt in in_hand.items()],
                   detail=f"SIGTERM, grace {grace:g} s, {event.variant}", **elsewhere)
        _grace_timer(sup, event, at, grace, elsewhere)
        signalled.append((at, elsewhere))
    # The worker goes on from the point at once: held there longer, its session could outlive a server-side
    # limit (lease-outbox's) for a reason that is ours, not the design's.
    sup.go(stop)
    for at, elsewhere in signalled:
        if how == DRAIN:
            _when_gone(sup, event, at, elsewhere)
        else:
            _replace(sup, event, at, elsewhere, same_identity=how == SAME_IDENTITY)


def _grace_timer(sup: SupervisorAPI, event: Event, at: Stop, grace: float, elsewhere: dict) -> None:
    def over():
        if sup.kill_after_grace(at.worker):
            sup.record(FaultStep.GRACE_KILL, event, at, detail="SIGKILL: still there after the grace",
                       **elsewhere)

    sup.later(grace, over)


def _replace(sup: SupervisorAPI, event: Event, at: Stop, elsewhere: dict, *, same_identity: bool) -> None:
    system = sup.system_identity(at.worker) if same_identity else None
    new = sup.start_replacement(at.worker, same_identity=same_identity)
    sup.record(FaultStep.REPLACEMENT_STARTED, event, at, replacement=new,
               system_identity=system or sup.system_identity(new),
               detail=f"replacement {new} ({'same' if same_identity else 'new'} system identity)",
               **elsewhere)


def _when_gone(sup: SupervisorAPI, event: Event, at: Stop, elsewhere: dict) -> None:
    def look():
        if sup.worker_alive(at.worker):
            sup.later(DRAIN_CHECK, look)
        else:
            _replace(sup, event, at, elsewhere, same_identity=False)

    sup.later(DRAIN_CHECK, look)
