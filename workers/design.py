"""The design boundary: what the harness asks of a design, and the one handle it asks through.

A **design** is any object with the members of :class:`~workers.interface.Design` (a built-in design, a
hosted library's adapter, a worker-contract client, a user's own worker). The protocol and its small types
(:data:`~workers.interface.POOL`, :class:`~workers.interface.Origin`, :class:`~core.history.Clock`) live in
``workers/interface.py``, below the built-in designs and the hosting, which import them;
this module, above both, is the handle. :func:`~workers.loading.load_design` builds a design once from
its spec and options and returns a :class:`DesignHandle`: every optional member resolved to its value or
its default, and the design's :attr:`~DesignHandle.origin` (built-in, library, plug-in) as the loader
found it, so that the rest of the harness reads attributes and never probes the object nor tells a design
by its name (only here and in ``workers/loading.py`` is a design's object read by ``getattr``). Each run
goes through :meth:`DesignHandle.for_run`, a :class:`DesignRun` bound to that run's schedule.

Required (:class:`~workers.interface.Design`):

``name`` (str)
    shown in reports.
``default_restart_delay`` (float, article seconds)
    how long the supervisor waits before replacing a dead worker.
``install(conn, *, worker_role)``
    extra schema on the admin connection (the owner), after the article's tables exist, and the
    grants the ordinary ``worker_role`` needs (never BYPASSRLS). May do nothing.
``enqueue(conn, jobs, *, max_attempts)``
    queue every :class:`~core.schedule.JobSpec` in order.
``run_worker(ctx)``
    the worker loop, in the forked worker (``ctx`` is a :class:`workers.body.context.WorkerContext`);
    return when ``ctx.may_dequeue()`` is false. A return with the budget not spent is recorded as the
    worker having stopped by itself (``stopped-by-itself``, with its log's last line), and the
    supervisor replaces it like a worker that died.
``pending(conn) -> int``
    how many jobs the design's workers or its recovery may still act on (the quiescence test).
``final_states(conn) -> list[dict]``
    every job's ``id, tenant_id, status, attempts, max_attempts, last_error, lease_expired``.

Optional, with their defaults (:class:`~workers.hosted.HostedDesign` and
:class:`~workers.builtin.base.QueueDesign` declare nearly every one):

``points`` (:data:`~core.schedule.JOB_POINTS`)
    the strike points its workers reach; the search draws fault points only from these.
``exit_outcomes`` (``{}``)
    exit codes its worker uses on purpose, named for the history (``{75: "abandoned ..."}``); never a
    name of :class:`~core.events.WorkerExitReason` (``budget``, ``stopped-by-itself``, ...), nor near one.
``tenant_setting`` (``"app.tenant"``)
    the setting its own tenant code sets; the invoices' policy reads it in its runs.
``pool_first`` (False)
    the worker opens the harness's pool before ``run_worker`` (a hosted library's tasks borrow from it).
``min_time_scale`` (None)
    below this time scale the design cannot keep its own intervals' ratios.
``hosted`` (False; :class:`~workers.hosted.HostedDesign` declares True; True too for a design with ``reset``)
    it hosts a queue library: its finish is the library's, judged by ``library-one-finish``.
``one_host`` (False)
    the design's client takes one host, not a multi-host DSN (awa's sqlx, DBOS's SQLAlchemy URL,
    node-postgres: the four adapters declare it): on the replicated back end its workers get the
    endpoint that follows the primary (``harness/runner.py``).
``concurrency`` (``"pool"``: :data:`~workers.interface.POOL`)
    a hosted design's bodies at once in one worker by the library's documented default (an int of at
    least 1; None: no limit); the body's pool is sized from it (:meth:`DesignHandle.pool_size`). The
    default: the schedule's ``pool_size`` (a built-in design's worker loop runs one job at a time).
``tenant_cap`` (None: no promise)
    the most of one tenant's jobs the design promises to run at once, across all its workers (an int of
    at least 1; a job of no tenant counts as one more tenant): ``lease-tenant-cap``'s ``cap``, a hosted
    library's per-tenant limit where its adapter configures one. Recorded in the history;
    ``tenant-cap`` judges it (not judged without one). A limit per worker process is no such promise.
``recovery_statements`` (``()``)
    the names of the statements by which the design recovers another worker's jobs (``lease.claim``,
    which takes over an expired lease; ``lease.sweep``; a library's re-pick or recovery query), as its
    statement points name them (``sql:<name>``; a library's statement, in no ``.sql`` file of ours, by the
    digest of its text: procrastinate's stalled-jobs query is ``3f74fb2d``, docs/reference/adapters.md):
    the small-scope pass strikes the faults that aim at recovery (a catalogue entry's
    ``aims_at_recovery``: ``restart``, ``deploy``) there first.
``system_identity(identity)`` (the identity itself)
    the identity its worker gives its system when the harness names none (``WorkerSpec.system_id`` empty):
    DBOS's adapter gives its executor the worker's slot (``w1`` of ``w1.0``), so a restart keeps it. A
    deploy's ``same-identity`` replacement is given the old worker's, a ``rolling`` one its own identity.
``for_run(schedule)`` (the design itself)
    the design's view of one run, bound to its schedule (``HostedDesign`` returns a copy carrying
    ``schedule`` and ``lease``); a ``for_run`` that returns None leaves the design itself as the view.
``reset(conn)`` (nothing)
    empty the library's own tables between runs (the harness empties its own, in its schema ``pgjc``).
``versions()`` (``{}``)
    ``{distribution: version}`` of what it hosts, saved with a schedule.
``timing_notes(schedule)`` (``[]``) and ``stall_extra(schedule)`` (0.0)
    the documented ratios a schedule cannot keep; the article seconds a run's stall limit stretches by.
``accepted_finishes(conn)`` (None: cannot tell)
    what the library accepted per job, from its own tables (``workers/hosted/protocol.py``).
``lease_seconds(schedule)`` (not declared: the design's ``clock``)
    real seconds after which it takes a job back (lease, visibility or lock timeout; None: never):
    ``horizon`` judges half of it, with no verdict without one (:meth:`DesignHandle.clock`).
``clock(schedule)`` (no lease the harness knows)
    the same as a :class:`~core.history.Clock` (seconds, basis, what), stated by each design kind:
    :class:`~workers.builtin.base.QueueDesign`'s is the schedule's lease, a
    :class:`~workers.hosted.HostedDesign`'s its ``TIMING`` interval anchored to the lease (none without
    one). A declared ``lease_seconds`` comes first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast, runtime_checkable

import psycopg

from ..core.errors import UsageError
from ..core.events import WORKER_EXIT_REASONS, exit_outcome
from ..core.schedule import JOB_POINTS, Schedule
from .body.context import WorkerContext
from .interface import POOL, REQUIRED, Clock, Design, Finishes, Origin, Row
from .tenant.modes import SETTING

__all__ = ["OVERLAP_CAP", "POOL", "REQUIRED", "Clock", "Design", "DesignHandle", "DesignRun", "Finishes",
           "Origin", "Row", "key_of"]

# What a declared lease_seconds that gives None did, in the run's Clock.what (horizon's evidence quotes it).
NO_LEASE = "returned None where the harness asks for it (the run's view, after for_run)"

# The most connections a hosted body's pool may open for executions that overlap (a retry started while
# the previous execution still runs): jobs x max_attempts up to this. Opened as needed, never at start.
OVERLAP_CAP = 64


# The optional methods, one protocol each: ``isinstance`` on them (inside this module only) is how the
# handle learns which a design has.
@runtime_checkable
class _Binds(Protocol):
    def for_run(self, schedule: Schedule) -> object: ...


@runtime_checkable
class _Resets(Protocol):
    def reset(self, conn: psycopg.Connection) -> None: ...


@runtime_checkable
class _Versioned(Protocol):
    def versions(self) -> Mapping[str, str]: ...


@runtime_checkable
class _Notes(Protocol):
    def timing_notes(self, schedule: Schedule) -> list[str]: ...


@runtime_checkable
class _Stalls(Protocol):
    def stall_extra(self, schedule: Schedule) -> float: ...


@runtime_checkable
class _Accepts(Protocol):
    def accepted_finishes(self, conn: psycopg.Connection) -> Finishes | None: ...


@runtime_checkable
class _Leased(Protocol):
    def lease_seconds(self, schedule: Schedule) -> float | None: ...


@runtime_checkable
class _Clocked(Protocol):
    def clock(self, schedule: Schedule) -> Clock: ...


@dataclass(frozen=True)
class DesignRun:
    """A design bound to one run's schedule: what the runner and the supervisor call for that run."""

    handle: DesignHandle
    design: Design  # the run's view (a HostedDesign's copy carrying the schedule), or the design itself
    schedule: Schedule

    def enqueue(self, conn: psycopg.Connection) -> None:
        self.design.enqueue(conn, self.schedule.jobs, max_attempts=self.schedule.max_attempts)

    def run_worker(self, ctx: WorkerContext) -> None:
        self.design.run_worker(ctx)

    def pending(self, conn: psycopg.Connection) -> int:
        return self.design.pending(conn)

    def final_states(self, conn: psycopg.Connection) -> list[Row]:
        return self.design.final_states(conn)

    def accepted_finishes(self, conn: psycopg.Connection) -> Finishes | None:
        """What the library accepted per job (None: the design cannot tell)."""
        return self.design.accepted_finishes(conn) if isinstance(self.design, _Accepts) else None

    def timing_notes(self) -> list[str]:
        return self.handle.timing_notes(self.schedule)

    def stall_extra(self) -> float:
        return self.handle.stall_extra(self.schedule)

    def clock(self) -> Clock:
        """The design's lease in this run, asked of the run's view (:meth:`DesignHandle.clock`)."""
        return self.handle.clock(self.schedule, self.design)


@dataclass(frozen=True)
class DesignHandle:
    """One design, built once per process, with every optional member resolved (the module docstring
    lists them and their defaults). Construct it with :func:`load_design` or :meth:`of`."""

    design: Design
    spec: str  # what was asked for: a built-in's or a library's name, or module:attr / file.py:attr
    options: Mapping[str, str] = field(default_factory=dict)
    origin: Origin = Origin.PLUGIN  # where it came from (load_design sets it), never told by its name
    name: str = ""
    default_restart_delay: float = 0.0
    points: tuple[str, ...] = JOB_POINTS
    exit_outcomes: Mapping[int, str] = field(default_factory=dict)
    tenant_setting: str = SETTING
    pool_first: bool = False
    min_time_scale: float | None = None
    hosted: bool = False
    concurrency: int | str | None = POOL
    one_host: bool = False
    tenant_cap: int | None = None
    recovery_statements: tuple[str, ...] = ()
    system_identity: Callable[[str], str] = str  # the identity itself

    @classmethod
    def of(cls, design: object, spec: str = "", options: Mapping[str, str] | None = None, *,
           origin: Origin = Origin.PLUGIN) -> DesignHandle:
        """The handle of an already built *design* (from *origin*: :func:`load_design` knows it; a
        design built elsewhere is a plug-in's); :class:`UsageError` naming what is missing when it
        does not fit :class:`Design`, or when its ``install`` takes no ``worker_role``."""
        label = spec or type(design).__name__
        missing = [m for m in REQUIRED if not hasattr(design, m)]
        if missing:
            raise UsageError(f"--design {label} does not fit the design protocol: missing "
                             f"{', '.join(missing)} (see workers/design.py)")
        not_callable = [m for m in REQUIRED[2:] if not callable(getattr(design, m))]
        if not_callable:
            raise UsageError(f"--design {label}: {', '.join(not_callable)} must be callable")
        _check_install(design, label)
        d = cast(Design, design)

        # The optional members, each read once here (None, absent or empty: the default).
        points: Iterable[str] = getattr(design, "points", None) or JOB_POINTS
        exits: Mapping[int, str] = getattr(design, "exit_outcomes", None) or {}
        setting: str = getattr(design, "tenant_setting", None) or SETTING
        floor: float | None = getattr(design, "min_time_scale", None)
        concurrency = getattr(design, "concurrency", POOL)  # None: unlimited, not the default
        if concurrency is not None and concurrency != POOL and not (
                isinstance(concurrency, int) and not isinstance(concurrency, bool) and concurrency >= 1):
            raise UsageError(f"--design {label}: concurrency {concurrency!r}: a whole number of at least 1, "
                             f"None (no limit) or {POOL!r} (the schedule's pool_size)")
        for code, named in exits.items():
            try:  # a reason's name would read as the harness's verdict (core/events.py's WorkerExitReason)
                taken = exit_outcome(named) != named or named in WORKER_EXIT_REASONS
            except ValueError:
                taken = True
            if taken:
                reasons = ", ".join(sorted(WORKER_EXIT_REASONS))
                raise UsageError(f"--design {label}: exit_outcomes names code {code} {named!r}, a "
                                 f"worker-exit reason of the harness's ({reasons}) or near one: name it "
                                 "after what the worker does")
        cap = getattr(design, "tenant_cap", None)
        if cap is not None and not (isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1):
            raise UsageError(f"--design {label}: tenant_cap {cap!r}: a whole number of at least 1, or None "
                             "(no per-tenant cap promised)")
        recovery = getattr(design, "recovery_statements", None) or ()
        if isinstance(recovery, str) or not all(isinstance(n, str) and n for n in recovery):
            raise UsageError(f"--design {label}: recovery_statements {recovery!r}: a tuple of statement "
                             "names (as its statement points name them: 'lease.sweep' for sql:lease.sweep)")
        return cls(
            design=d,
            spec=spec or d.name,
            options=dict(options or {}),
            origin=origin,
            name=str(d.name),
            default_restart_delay=float(d.default_restart_delay),
            points=tuple(points),
            exit_outcomes=dict(exits),
            tenant_setting=str(setting),
            pool_first=bool(getattr(design, "pool_first", False)),
            min_time_scale=floor or None,
            hosted=bool(getattr(design, "hosted", False)) or isinstance(design, _Resets),
            concurrency=concurrency,
            one_host=bool(getattr(design, "one_host", False)),
            tenant_cap=cap,
            recovery_statements=tuple(recovery),
            system_identity=getattr(design, "system_identity", None) or str,
        )

    @property
    def key(self) -> str:
        """What a schedule names this design by: its spec and options (the runner's cache key)."""
        return key_of(self.spec, self.options)

    def for_run(self, schedule: Schedule) -> DesignRun:
        """The design bound to *schedule*, before the run's enqueue and fork (in the supervisor's process)."""
        view = self.design.for_run(schedule) if isinstance(self.design, _Binds) else None
        return DesignRun(self, cast(Design, view) if view is not None else self.design, schedule)

    def pool_size(self, schedule: Schedule) -> int:
        """The size of the body's pool in a run of *schedule*: never what bounds how many bodies run at
        once. A design of the default :attr:`concurrency` (built-in, or hosted and declaring none): the
        schedule's ``pool_size``. A declared one: at least as many as it runs at once (its concurrency,
        at most the schedule's jobs), and room for executions that overlap -- a retry the library starts
        while the previous execution still runs (pg-boss past an expiration, awa's rescue, oban's
        lifeline) -- up to jobs x ``max_attempts``, at most :data:`OVERLAP_CAP`. The pool opens
        its connections as they are needed (``workers/tenant/modes.py``); the runner stamps this size into
        the run's schedule, where ``pool-hygiene`` and a replay read it."""
        if self.concurrency == POOL:
            return schedule.pool_size
        jobs = len(schedule.jobs)
        at_once = jobs if self.concurrency is None else min(int(self.concurrency), jobs)
        return max(schedule.pool_size, at_once, min(jobs * schedule.max_attempts, OVERLAP_CAP))

    def install(self, conn: psycopg.Connection, *, worker_role: str) -> None:
        self.design.install(conn, worker_role=worker_role)

    def reset(self, run: DesignRun, conn: psycopg.Connection) -> None:
        """Empty the library's own tables before *run* (nothing for a design without ``reset``)."""
        if isinstance(run.design, _Resets):
            run.design.reset(conn)

    def versions(self) -> dict[str, str]:
        return dict(self.design.versions()) if isinstance(self.design, _Versioned) else {}

    def timing_notes(self, schedule: Schedule) -> list[str]:
        return list(self.design.timing_notes(schedule)) if isinstance(self.design, _Notes) else []

    def stall_extra(self, schedule: Schedule) -> float:
        return float(self.design.stall_extra(schedule)) if isinstance(self.design, _Stalls) else 0.0

    def clock(self, schedule: Schedule, view: object | None = None) -> Clock:
        """The design's lease in a run of *schedule* (the module docstring's ``lease_seconds`` and
        ``clock``): its own ``lease_seconds`` (``basis`` ``declared``) first, else what its kind states
        (its ``clock``: a hosted library's ``TIMING`` interval, a built-in's schedule lease), else none.

        Asked of *view*, the run's view (:attr:`DesignRun.design`; None: bound here by :meth:`for_run`),
        never of the design itself: a ``HostedDesign``'s ``lease`` and ``schedule`` are set on the view
        only, so a ``lease_seconds`` that returns ``self.lease`` -- as the guide says it may -- gets the
        schedule's lease (asked of the design itself it was None, and ``horizon`` silently not judged:
        issue 46). A declared ``lease_seconds`` that still gives None here leaves ``horizon`` not judged,
        with the reason in ``what`` (:data:`NO_LEASE`); ``check-design`` fails on it
        (``core/misdeclared.py``)."""
        d = view if view is not None else self.for_run(schedule).design
        if isinstance(d, _Leased):
            own = d.lease_seconds(schedule)
            if own is None:
                return Clock(None, "declared", f"{self.name}'s lease_seconds {NO_LEASE}")
            return Clock(float(own), "declared", f"{self.name}'s own lease (its lease_seconds)")
        if isinstance(d, _Clocked):
            clock = d.clock(schedule)
            if not isinstance(clock, Clock):
                raise UsageError(f"--design {self.spec}: clock(schedule) returned {clock!r}, not a "
                                 "workers.interface.Clock")
            return clock
        return Clock(None, None, f"{self.name} has no lease the harness sets (not built in, no TIMING "
                     "interval anchored to it) and declares none (lease_seconds)")


def key_of(spec: str, options: Mapping[str, str] | None) -> str:
    return f"{spec}|{sorted((options or {}).items())!r}"


def _check_install(design: object, label: str) -> None:
    """A design's ``install`` must take ``worker_role`` (its grants are the design's job)."""
    try:
        inspect.signature(cast(Design, design).install).bind(None, worker_role="pgjc_worker")
    except TypeError:
        raise UsageError(f"--design {label}: install must take (conn, *, worker_role): the ordinary role the "
                         "workers log in as, to grant what they need") from None
    except ValueError:  # a builtin without a signature: trust it
        pass
