"""Protocol version 2: hosting a real queue library, observed rather than prescribed.

A built-in design (``workers/builtin/base.py``) claims from the harness's own ``jobs`` table. A **hosted**
design runs somebody else's queue -- a hosted library (``adapters/``), a user's own -- with its own
schema, claim SQL, retry policy, finish, heartbeats and recovery; the harness only supplies the job
body the library's task calls and reads, at the end, what the library says became of each job.

A hosted design (subclass :class:`HostedDesign`; the adapters are in ``adapters/``) provides the
members below; :class:`~workers.hosted.declared.DeclaredDesign` builds ``reset``, ``pending``,
``final_states`` and ``accepted_finishes`` from a status map and named SQL, as the adapters do:

``install(conn, *, worker_role)``
    the library's schema, by its own installer, on the admin connection (the owner), and the grants
    the ordinary ``worker_role`` needs. The worker role never gets BYPASSRLS.
``reset(conn)``
    empty the library's tables between runs (the harness empties its own, in its schema ``pgjc``).
``enqueue(conn, jobs, *, max_attempts)``
    queue every :class:`~core.schedule.JobSpec` through the library, with :func:`job_args` as the
    task's arguments, configured to run at most *max_attempts* times in all; record the library's
    ids with :func:`record_ids`.
``for_run(schedule)`` (optional; :class:`HostedDesign` returns a copy carrying ``schedule`` and ``lease``)
    the design's view of one run, called before its enqueue; the run's queries go to that view.
``pending(conn) -> int``
    jobs the library's workers or its recovery may still act on -- including a job a worker has
    claimed whose body has not logged ``started`` yet (a running job with a live heartbeat, or one
    claimed less than a lease ago): the run is over when this is 0 and no body is running, so a job
    left out here can be cut off between its claim and its body.
``final_states(conn) -> list[dict]``
    per job: ``id`` (the schedule's id), ``tenant_id``, ``status`` -- one of :data:`STATES`, mapped from
    the library's own; a status that cannot be mapped is passed through as it is, and the properties
    that read it say ``unknown`` -- ``attempts`` (executions the library counted), ``last_error``,
    ``lease_expired`` (None when the library has no such notion). The *configured* limit is the
    schedule's ``max_attempts``, never a column the library may change.
``run_worker(ctx)``
    the library's real worker loop in the forked worker, at the library's default concurrency and
    executor; its task calls :func:`run_job` (sync; from asyncio through ``asyncio.to_thread``, after
    :func:`body_threads`).
``concurrency`` (optional, :data:`POOL` by default)
    how many job bodies one worker process of the library runs at once by its documented default
    (None: no limit), with the source line that says so; the body's pool is sized from it
    (:meth:`~workers.design.DesignHandle.pool_size`). :data:`POOL`: as many as the schedule's
    ``pool_size``, which is then the body's pool, as it is.
    Timing derives from the schedule (``ctx.lease``, ``ctx.poll``, ``ctx.heartbeat``, real seconds);
    logic stays as documented.
``tenant_cap`` (optional, None by default)
    the most of one tenant's jobs the library is configured to run at once across all its workers (a
    per-tenant lock, queue or partition limit the adapter sets), with the source line that says so;
    ``tenant-cap`` judges it (:mod:`workers.design`). A limit per worker process is not one.
``TIMING`` (optional, a :class:`~workers.hosted.timing.Intervals`)
    the library's intervals as data: :meth:`HostedDesign.intervals` gives their real seconds for a
    schedule, in the ratios of the library's documented defaults; :meth:`HostedDesign.timing_notes`
    the ratios it cannot keep (the run's notes); :meth:`HostedDesign.stall_extra` the article seconds
    the run's stall and deadline limits stretch by (its longest recovery period).
``accepted_finishes(conn) -> dict[int, dict] | None`` (optional; :class:`HostedDesign` returns None)
    what the library itself accepted, from its own tables after the run, by schedule job id:
    ``finishes``, each finish it recorded, in its order -- ``outcome`` (one of
    :data:`~core.history.FINISH_OUTCOMES`), ``what`` (its name for it), ``at`` (an aware datetime; None
    when it keeps no time), ``clock`` (``database``, the default, the server's clock -- a time the finish's
    own statement took, ``clock_timestamp()``: a ``now()`` in a transaction the job ran in is before the
    job, which ``check-design`` fails on (``core/misdeclared.py``); ``worker``, the worker host's
    clock), optionally ``attempt`` (the 1-based attempt the body was told) -- and
    ``recorded``, one line of what its tables say of the job. None: the library cannot tell, and
    ``library-one-finish`` says unknown. The body commits and sends before the library's finish runs;
    this is how the finish itself is judged (:mod:`workers.hosted.finishes` puts it in the history).

Constructor keyword arguments are the ``--design-option key=value`` strings; a saved schedule keeps
them and the library's version (:meth:`HostedDesign.versions`), and a replay uses them.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.metadata
import signal
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Self, overload

from psycopg.types.json import Jsonb

from ...core import sqlfile
from ...core.errors import UsageError
from ...core.history import JOB_STATES
from ...core.schedule import Schedule
from ..body.execution import STRIKE_SIGNAL, Claimed
from ..interface import POOL, Clock
from . import own_connection, timing

Q = sqlfile.load(__file__, "protocol.sql", "record_id", "schedule_ids")

__all__ = ["HOSTED_POINTS", "POOL", "STATES", "HostedDesign", "Jsonb", "body_threads", "claimed", "job_args",
           "record_ids", "run_job", "schedule_ids"]


STATES = JOB_STATES
"""What ``final_states`` may say of a job: waiting to run (or to be retried), taken by a worker,
finished successfully, given up (failed for good, cancelled, expired)."""

# The hosted body's points, in the order it reaches them (see run_job).
HOSTED_POINTS = ("before-tenant", "mid-work", "after-effect", "before-finish", "after-insert")


def job_args(job) -> dict:
    """The task arguments a hosted design enqueues for *job* (JSON-able): :func:`run_job` needs them back."""
    return {"job": job.id, "tenant": job.tenant, "duration": job.duration, "fault": job.fault,
            "point": job.point, "strikes": job.strikes}


def record_ids(conn, pairs: Iterable[tuple[int, object]]) -> None:
    """Remember which library id each schedule job got (``job_map``; ids of any type, kept as text)."""
    with conn.cursor() as cur:
        cur.executemany(Q.record_id, [{"job": job, "library_id": str(lib)} for job, lib in pairs])


def schedule_ids(conn) -> dict[str, int]:
    """``{library id as text: schedule job id}`` for the jobs of the current run."""
    return {lib: job for job, lib in conn.execute(Q.schedule_ids)}


def claimed(args: dict, attempt: int) -> Claimed:
    """The job the library handed over, as the body runs it; *attempt* as the library counts it (1-based)."""
    payload = {"duration": args.get("duration", 0.0), "fault": args.get("fault"), "point": args.get("point"),
               "strikes": args.get("strikes")}
    return Claimed(int(args["job"]), args.get("tenant"), int(attempt), payload)


def run_job(ctx, args: dict, *, attempt: int, conn=None, work=None) -> None:
    """The harness's job body, as a library's task runs it. With *conn* (the connection the worker
    gives the job, its tenant already set by the worker's own code): on that connection, observed
    and not changed (:mod:`workers.hosted.own_connection`). Without: on a connection of the harness's
    pool (its tenant mode), with short transactions of its own -- read (tenant set, invoices read),
    work and side effect outside any transaction, then the ``job_runs`` row committed. Every fault
    strikes inside at :data:`HOSTED_POINTS`, none inside a transaction (a pause there would hold the
    horizon back: the body's doing, not the library's); ``after-insert`` is after the body's commit.
    Raises what the body raised (``raise``, ``sql-error``, a lost connection), so the library records
    the failure and applies its own retry policy; the library then writes its own finish. Safe to
    call from several threads at once (one connection each). *work*: see :func:`own_connection.run_on`."""
    job = claimed(args, attempt)
    _block_strike_signal(ctx, job)
    if conn is not None:
        own_connection.run_on(ctx, conn, job, work)
        return
    if ctx.spec.tenant_setting != own_connection.DEFAULT_SETTING:
        raise UsageError(f"tenant_setting {ctx.spec.tenant_setting!r} names the worker's own tenant code: "
                         "pass its connection, run_job(ctx, args, attempt=..., conn=conn)")
    if ctx.pool is None:
        ctx.open_pool()
    with ctx.pool.connection() as conn:
        _run_on_pool(ctx, conn, job, work)


def body_threads(ctx) -> None:
    """Give the running event loop a default executor (``asyncio.to_thread``'s) with a thread for every
    connection of the body's pool. Hazard: asyncio's own has min(32, cores + 4) threads -- 6 on two
    cores -- and would bound a library that runs 50 bodies at once; the few threads over the pool are for
    the statement wrapper's waits at a strike point (``workers/body/statements.py``), which take one too."""
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=ctx.schedule.pool_size + 4, thread_name_prefix="pgjc-body"))


def _block_strike_signal(ctx, job: Claimed) -> None:
    if STRIKE_SIGNAL not in signal.pthread_sigmask(signal.SIG_BLOCK, ()):
        # The library made this thread with the strike signal unblocked (the worker blocks it before
        # the library starts): block it here, and say so -- another such thread would die of it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {STRIKE_SIGNAL})
        ctx.log.write("strike-signal-unblocked", job=job.id, thread=threading.current_thread().name)


def _run_on_pool(ctx, conn, job: Claimed, work=None) -> None:
    ex = ctx.execution(conn, job)
    try:
        ex.started()
        started = ex.read_briefly()
        if work is not None:
            work()
        ex.work()
        ex.effect()
        ex.point("before-finish")
        with ex.finishing(started):
            pass  # the job_runs row alone: the library writes its own finish
        # After the job's work committed, before the library hears of it: a crash here is the
        # classic "done twice" (the library re-runs a job whose work is already in the database).
        ex.point("after-insert")
    except BaseException as exc:
        ex.failed(exc)
        raise
    ex.finished()


class HostedDesign:
    """Base of the adapters: protocol-v2 defaults and the options/versions every one shares."""

    name = "hosted"
    library: str | None = None  # the PyPI distribution hosted, whose version a saved schedule records
    default_restart_delay = 1.1  # article seconds before a dead worker is replaced, as for the leases
    points: tuple[str, ...] = HOSTED_POINTS
    exit_outcomes: dict[int, str] = {}
    min_time_scale: float | None = None  # below this the library cannot honour its own intervals
    # Bodies one worker runs at once by the library's default (None: unlimited; the module docstring).
    concurrency: int | str | None = POOL
    pool_first = True  # the worker opens the harness's pool before run_worker: no job waits for it
    # The setting the worker's own tenant code sets (run_job's conn=); the invoices' row-level security
    # policy reads it in this design's runs. The harness's tenant modes set app.tenant.
    tenant_setting = own_connection.DEFAULT_SETTING
    OPTIONS: dict[str, str] = {}  # --design-option keys this design knows: {key: what it sets}
    TIMING: timing.Intervals | None = None  # the library's intervals, as data (workers/hosted/timing.py)
    hosted = True
    one_host = False  # its client takes a multi-host DSN (an adapter whose client cannot declares True)
    # The most of one tenant's jobs the library is configured to run at once across all workers (None:
    # no such limit; workers/design.py), with the source line that sets it.
    tenant_cap: int | None = None
    schedule: Schedule | None = None  # the run's, on the view for_run returns; None on the design itself
    lease: float | None = None  # the run's lease in real seconds, likewise

    def __init__(self, **options: str):
        unknown = [k for k in options if k not in self.OPTIONS]
        if unknown:
            known = ", ".join(f"{k} ({v})" for k, v in self.OPTIONS.items()) or "none"
            raise UsageError(f"design {self.name}: unknown option {unknown[0]!r}; options: {known}")
        self.options = dict(options)

    def choice(self, key: str, choices: tuple[str, ...]) -> str:
        """The option *key*, one of *choices* (the first when it is not given); else a UsageError."""
        value = self.options.get(key, choices[0])
        if value not in choices:
            raise UsageError(f"design {self.name}: {key}={value!r}; one of {', '.join(choices)}")
        return value

    @overload
    def whole(self, key: str, default: int) -> int: ...
    @overload
    def whole(self, key: str, default: None = None) -> int | None: ...

    def whole(self, key: str, default: int | None = None) -> int | None:
        """The option *key*, a whole number of at least 1 (*default* when it is not given)."""
        value = self.options.get(key)
        if value is not None and not (value.isdigit() and int(value) >= 1):
            raise UsageError(f"design {self.name}: {key}={value!r}; a whole number of at least 1")
        return int(value) if value is not None else default

    def versions(self) -> dict[str, str]:
        """The hosted library's version, for the saved schedule (empty when none is named)."""
        if not self.library:
            return {}
        try:
            return {self.library: importlib.metadata.version(self.library)}
        except importlib.metadata.PackageNotFoundError:
            return {self.library: "not installed"}

    def for_run(self, schedule: Schedule) -> Self:
        """The design's view of one run, before its enqueue (in the supervisor's process, so also before
        the fork): a shallow copy carrying *schedule* and its lease in real seconds (``pending`` runs in
        the supervisor's process, where there is no worker context). The design itself keeps no run's
        state. An override calls this and returns what it returns, with its own per-run state set."""
        run = copy.copy(self)
        run.schedule = schedule
        run.lease = schedule.seconds(schedule.timing.lease)
        return run

    def intervals(self, schedule) -> dict[str, float]:
        """``{interval: real seconds}`` of the library for *schedule* (:attr:`TIMING`; empty without
        either: the design itself, before :meth:`for_run`, has no schedule)."""
        return self.TIMING.values(schedule) if self.TIMING is not None and schedule is not None else {}

    def timing_notes(self, schedule) -> list[str]:
        """One sentence per documented ratio *schedule* cannot keep (the run's notes)."""
        return self.TIMING.notes(schedule) if self.TIMING is not None else []

    def stall_extra(self, schedule) -> float:
        """Article seconds the run's stall and deadline limits stretch by: the library's longest
        recovery period, so that a run does not end before its recovery could act (0 without)."""
        return self.TIMING.stall_extra(schedule) if self.TIMING is not None else 0.0

    def clock(self, schedule: Schedule) -> Clock:
        """The library's lease in a run of *schedule*: its :attr:`TIMING` interval anchored to the lease
        (``basis`` ``timing``), fixed in the library or set from the schedule's lease; without one, no
        lease the harness knows (``seconds`` None). A subclass that knows its own declares
        ``lease_seconds(schedule)`` instead, which the handle reads first (``workers/design.py``)."""
        intervals = self.TIMING
        anchor = intervals.anchors.get("lease") if intervals is not None else None
        if intervals is None or anchor is None:
            return Clock(None, None, f"{self.name} has no lease the harness sets (not built in, no TIMING "
                                     "interval anchored to it) and declares none (lease_seconds)")
        fixed = intervals[anchor].grid == timing.FIXED
        how = "fixed in the library" if fixed else "set from the schedule's lease"
        return Clock(intervals.values(schedule)[anchor], "timing", f"{intervals.library}'s {anchor}, {how}")

    def install(self, conn, *, worker_role: str) -> None:
        raise NotImplementedError

    def reset(self, conn) -> None:
        raise NotImplementedError

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        raise NotImplementedError

    def pending(self, conn) -> int:
        raise NotImplementedError

    def final_states(self, conn) -> list[dict]:
        raise NotImplementedError

    def run_worker(self, ctx) -> None:
        raise NotImplementedError

    def ready(self, ctx) -> bool:
        """Where a ``run_worker`` begins: False when the worker may take no job at all; else True, with
        the harness's pool for the body open where the body runs in this process (``pool_first``: the
        supervisor opens it first; ``run.py bench``'s cost figures call ``run_worker`` directly)."""
        if not ctx.may_dequeue():
            return False
        if self.pool_first and ctx.pool is None:
            ctx.open_pool()
        return True

    def accepted_finishes(self, conn) -> dict[int, dict] | None:
        """What the library accepted for each job, from its own tables on the admin connection after
        the run (the module docstring gives the shape). The default, None: the library cannot tell."""
        return None
