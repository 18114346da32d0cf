"""The names of the execution log's events, of the supervisor's injected fault records and of the ways a
run ends: one registry.

A record's ``event`` (``core.execlog``) and a history's ``ended_by`` were bare strings at every writer
and reader; a misspelt one matched nothing, silently. As ``core.sqlfile`` resolves SQL names at import,
these names resolve here: :class:`LogEvent` and :class:`EndedBy` are ``StrEnum`` s, so a member *is* its
string -- what the files on disk hold, saved histories and reports unchanged -- and a misspelt member is
an ``AttributeError`` where it is written. :meth:`core.execlog.ExecLog.write` refuses a misspelt name (a
letter or two off a registered one: :func:`misspelt`), and so do the history's readers
(``core.history.History.executions``); a name far from every registered one is a design's own event,
written as it is and passed over by the properties (``ctx.log.write("probe", ...)``).
``tests/unit/test_events.py`` checks every literal the product writes or compares with a record's
event, and the contract clients' (another runtime: they cannot import this), against the registry.

What the supervisor injected (``History.injected``, an entry per step of a supervisor fault) is named
by :class:`FaultStep`: the faults write their steps as members (``sup.record(FaultStep.PROMOTED, ...)``,
``faults/``), the supervisor refuses any other name where it is written (``Strikes.record``: a
``ValueError``), and the readers compare with members (``History.promotions``).

How a worker process ended by a reason of the harness's (``WorkerExit.outcome``, beside the exit statuses
"exit 1", "killed by SIGKILL" and a design's own ``exit_outcomes``) is named by :class:`WorkerExitReason`:
the supervisor writes members (``harness/supervisor/process.py``, ``loop.py``), the readers compare with
them (``properties/health.py``), a saved history's old name is read as its member (:func:`exit_outcome`:
"drained" is ``budget``), and a misspelt reason is refused where a :class:`~core.history.WorkerExit` is made.
"""

from __future__ import annotations

import difflib
import functools
from enum import StrEnum


class LogEvent(StrEnum):
    """Every event an execution-log record may carry, by who writes it."""

    # An execution's own steps (the job body: workers/body/execution.py; the contract clients' body too)
    STARTED = "started"
    EXECUTION_COUNT = "execution-count"  # which execution of a transient fault's job this is
    TENANT_INHERITED = "tenant-inherited"  # the tenant setting before the job set one
    ROWS_VISIBLE = "rows-visible"  # invoices the job saw, and how many of them another tenant's
    SERVER_SESSION = "server-session"  # behind a pooler: the server session at a point
    FAULT = "fault"  # a job fault struck at a point
    EFFECT = "effect"  # an external effect sent (a relay's: with its key)
    FINISHED = "finished"
    FAILED = "failed"
    FENCED = "fenced"
    # The world's answer to a keyed send (core/world.py)
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    # The worker's context and the statement wrapper (workers/body/context.py, workers/body/statements.py)
    CONNECT = "connect"  # a connection opened (the pool's, or the worker's own with its purpose)
    POINT = "point"  # at a watched point, waiting for the supervisor's go
    POINT_TIMEOUT = "point-timeout"  # the go never came within strike_wait
    STATEMENT = "statement"  # the first time the worker sent a statement point
    TENANT_STATEMENT = "tenant-statement"  # a job's own statement and the tenant setting it ran under
    SETTING_SET = "setting-set"  # a custom setting the worker's own code set by name (first time, per worker)
    # The built-in designs (workers/builtin/base.py, heartbeat.py, outbox.py)
    CLAIM_FAILED = "claim-failed"
    HEARTBEAT_ERROR = "heartbeat-error"
    LEASE_LOST = "lease-lost"
    ABANDONED = "abandoned"  # a job or a delivery hung past the max runtime: the process ends
    SWEPT = "swept"  # expired jobs marked dead by an idle sweep
    SESSION_LIMITS = "session-limits"  # lease-outbox's server-side timeouts
    RELAY_ERROR = "relay-error"
    SESSION_CUT = "session-cut"  # the server ended a session at one of those limits
    # The worker process (harness/supervisor/process.py, workers/body/execution.py worker_error)
    WORKER_START = "worker-start"
    WORKER_EXIT = "worker-exit"
    WORKER_ERROR = "worker-error"
    # Hosted libraries (workers/hosted/) and the contract's clients (workers/clients/)
    STRIKE_SIGNAL_UNBLOCKED = "strike-signal-unblocked"  # a library thread took the go signal's block off
    SPAWNED_CHILD = "spawned-child"  # a process the library spawned runs jobs
    PROCESS_EXIT = "process-exit"  # such a child, or the contract's client, died under its jobs
    TENANT_SEEN = "tenant-seen"  # a library's own tenant code: the setting as the job's code began
    CONTRACT_CLIENT = "contract-client"  # the forked worker started the contract's client command
    CLIENT_START = "client-start"  # the contract's client, started (its runtime)


class FaultStep(StrEnum):
    """Every name an injected record (``History.injected``: its ``fault``) may carry: the strike of each
    supervisor fault, by the fault's own catalogue name (``faults/catalogue.py``; a test keeps the two
    the same), and the further steps a fault records (``faults/supervisor.py``, ``faults/failover.py``)."""

    # A supervisor fault's strike: its catalogue name
    KILL = "kill"
    PAUSE = "pause"
    HORIZON = "horizon"
    TERMINATE = "terminate"
    LATENCY = "latency"
    PARTITION = "partition"
    RESET = "reset"
    LOST_COMMIT_REPLY = "lost-commit-reply"
    RESTART = "restart"
    FAILOVER = "failover"  # the standby's receiver cut (lagging), or a switchover's start
    FAILOVER_CANCEL = "failover-cancel"
    DEPLOY = "deploy"  # SIGTERM to the worker (its grace, its variant, the jobs in its hands)
    # The steps that follow it
    RESUME = "resume"  # a pause's SIGCONT
    HORIZON_RELEASED = "horizon-released"  # the horizon's holder ended its transaction
    SERVER_STARTED = "server-started"  # a restart's start again
    LATENCY_ENDED = "latency-ended"
    HEALED = "healed"  # a partition's end
    COMMIT_WAIT_CANCELLED = "commit-wait-cancelled"  # failover-cancel: commits waiting for the standby
    PRIMARY_STOPPED = "primary-stopped"  # a failover's primary stops (the record's time: as it began)
    PROMOTED = "promoted"  # the standby promoted (with the promotion's seconds)
    PRIMARY_DEMOTED = "primary-demoted"  # demote-in-place: the primary made read-only, left up (as it began)
    FAILOVER_SKIPPED = "failover-skipped"  # no standby left to fail over to (a second failover in a run)
    DEPLOY_SKIPPED = "deploy-skipped"  # the worker at the point already got a deploy's SIGTERM: none again
    GRACE_KILL = "grace-kill"  # a deploy's grace ran out with the worker still there: SIGKILL to its group
    REPLACEMENT_STARTED = "replacement-started"  # a deploy's replacement worker forked (its identities)


EVENTS: frozenset[str] = frozenset(e.value for e in LogEvent)
FAULT_STEPS: frozenset[str] = frozenset(s.value for s in FaultStep)
_MEMBERS: dict[str, LogEvent] = {e.value: e for e in LogEvent}


class EndedBy(StrEnum):
    """Why a run ended (``History.ended_by``; the supervisor's loop decides: harness/supervisor/loop.py)."""

    QUIESCENT = "quiescent"  # nothing pending, nothing running, for a few polls
    WORKERS_EXHAUSTED = "workers-exhausted"  # every worker gone and the restart budget spent
    STALLED = "stalled"  # nothing happened for the schedule's stall
    DEADLINE = "deadline"
    UNKNOWN = "unknown"  # a history that does not say (the default of a hand-made one)


END_REASONS: frozenset[str] = frozenset(e.value for e in EndedBy)


class WorkerExitReason(StrEnum):
    """Why a worker process ended, where the reason is not just its exit status (``WorkerExit.outcome``).

    The harness asks a worker to stop in two ways: by its dequeue budget (``Schedule.dequeues``: the
    design's ``run_worker`` returns once ``ctx.may_dequeue()`` is false; a hosted library's own graceful
    stop does the returning) and, in a deploy, by SIGTERM with a grace before SIGKILL. A worker whose
    ``run_worker`` returns while its budget is not spent stopped by itself: the design's code, or the
    library it hosts, decided (procrastinate stops its worker when a side task fails: its PR #1463).
    :attr:`asked` tells the two apart; the supervisor replaces a worker that stopped by itself, within
    the restart budget, as it replaces one that died (``harness/supervisor/loop.py``)."""

    BUDGET = "budget"  # run_worker returned, the dequeue budget spent: we asked (saved before as "drained")
    STOPPED_BY_ITSELF = "stopped-by-itself"  # run_worker returned, the budget not spent: its log says why
    # A deploy's (issue 47, faults/supervisor.py's deploy): the worker got SIGTERM and ...
    GRACEFUL = "graceful"  # ... exited within the grace
    KILLED_AFTER_GRACE = "killed-after-grace"  # ... was still there after it: SIGKILL

    @property
    def asked(self) -> bool:
        """Whether the harness asked for this end (its budget, a deploy's SIGTERM): not a worker lost."""
        return self is not WorkerExitReason.STOPPED_BY_ITSELF


WORKER_EXIT_REASONS: frozenset[str] = frozenset(r.value for r in WorkerExitReason)
# Names saved histories and reports used before the reasons were defined, read as today's.
OLD_EXIT_NAMES: dict[str, WorkerExitReason] = {"drained": WorkerExitReason.BUDGET}


def exit_outcome(name: str) -> str:
    """A worker exit's *name* as this version writes it: a :class:`WorkerExitReason` member for a reason
    (today's name or an old one, :data:`OLD_EXIT_NAMES`), any other outcome (an exit status, a design's
    own name) as it is. :class:`ValueError` for a reason misspelt (a letter or two off one)."""
    member = OLD_EXIT_NAMES.get(name) or (WorkerExitReason(name) if name in WORKER_EXIT_REASONS else None)
    if member is not None:
        return member
    near = difflib.get_close_matches(name, WORKER_EXIT_REASONS, n=1, cutoff=0.8)
    if near:
        raise ValueError(f"{name!r} is not a worker-exit reason: {near[0]!r} misspelt? "
                         "(core/events.py's WorkerExitReason)")
    return name


def misspelt(name: object) -> str | None:
    """Why *name* cannot be an event: not a string, or a registered name misspelt (a letter or two off
    one of :data:`EVENTS`). None for a registered name, and for a name of a user's own -- a design may
    log its own events (``ctx.log.write("probe", ...)``); the properties pass over them."""
    if not isinstance(name, str) or not name:
        return f"{name!r} is not an event name"
    return None if name in EVENTS else _near_miss(name)


@functools.cache
def _near_miss(name: str) -> str | None:
    """The verdict on a name outside the registry, worked out once per name: a design's own event is
    written at every execution, and difflib is not free."""
    near = difflib.get_close_matches(name, EVENTS, n=1, cutoff=0.8)
    return f"{name!r} is not an execution-log event: {near[0]!r} misspelt? (core/events.py's LogEvent)" \
        if near else None


def event_of(record: dict[str, object]) -> LogEvent | None:
    """*record*'s event as a :class:`LogEvent`; None for an event of a user's own; :class:`ValueError`
    naming the record for a misspelt one (:func:`misspelt`: a client's, a hand-made history's), so
    that a reader dispatching on events never passes over a name meant as one of ours."""
    name = record.get("event")
    member = _MEMBERS.get(name) if isinstance(name, str) else None
    if member is None:
        why = misspelt(name)
        if why is not None:
            where = ", ".join(f"{k} {record[k]}" for k in ("worker", "job", "t") if record.get(k) is not None)
            raise ValueError(f"execution-log record ({where}): {why}")
    return member
