"""procrastinate (3.x, psycopg 3) hosted under the harness: ``--design procrastinate``.

What runs is procrastinate's own: its schema (``SchemaManager.get_schema()``, ``sql/schema.sql``), its
defer (``procrastinate_defer_jobs_v1`` through ``Task.configure(connection=...).batch_defer``), its
asyncio worker (``App.run_worker_async``, its default concurrency 1), its fetch
(``procrastinate_fetch_job_v2``), its retry policy (``RetryStrategy`` on the task, applied by
``worker.py: Worker._process_job`` to an exception the task raised), its finish
(``procrastinate_finish_job_v1`` / ``procrastinate_retry_job_v2``), its worker heartbeats
(``Worker._update_heartbeat``, ``procrastinate_workers.last_heartbeat``), the pruning of stalled
workers at worker start, and the stalled-job recovery its documentation recommends
(docs/howto/production/retry_stalled_jobs.md: a periodic task, ``queueing_lock="retry_stalled_jobs"``,
that calls ``job_manager.get_stalled_jobs()`` and ``job_manager.retry_job(job)`` for each) -- copied
as documented. procrastinate's defaults stay (concurrency 1, ``listen_notify``, the sync task in a
thread); its intervals are derived from the schedule in the ratios of its documented defaults
(``workers/hosted/timing.py``, :data:`TIMING`): the schedule's lease is the 30 s stalled threshold, so the
recovery runs every 20 leases, as the documented cron runs every 10 minutes (20 x 30 s):

========================  ===============  ===================  ================  =========================
setting                   library default  docs' recommendation ours (lease L)    why
========================  ===============  ===================  ================  =========================
stalled threshold         30 s             30 s, changed with   L                 the anchor: a silent
(``get_stalled_jobs``                      the next two                           worker's job is taken
``seconds_since_                                                                  back after one lease
heartbeat``)
``stalled_worker_         30 s             30 s                 L                 ratio 1 : 1
timeout``
``update_heartbeat_       10 s             10 s                 L / 3             ratio 1 : 3
interval``
recovery period (cron     none (no         ``*/10 * * * *``     20 L on a cron    ratio 20 : 1; a cron
of ``retry_stalled_       recovery)        (600 s)              period            repeats evenly only on a
jobs``)                                                                           divisor of 60 s / 60 min
``fetch_job_polling_      5 s              5 s                  L / 6             ratio 1 : 6 (NOTIFY
interval``                                                                        wakes it first)
``abort_job_polling_      5 s              5 s                  L / 6             ratio 1 : 6
interval``
periodic deferrer         0.5 s, fixed     --                   0.5 s             cannot be set: reported,
margin (``MARGIN``)       (periodic.py)                                           bound none (a lag only)
``concurrency``           1                1                    1                 the library's default
``listen_notify``         True             True                 True              the library's default
retry                     none             ``RetryStrategy``    max_attempts - 1  the schedule's limit (it
                                                                retries           counts retries)
========================  ===============  ===================  ================  =========================

The recovery period stretches the run's stall and deadline limits (``HostedDesign.stall_extra``): a
crashed job waits up to one period for the next tick, so a pause must outlast about 20 leases before
the recovery takes its job. At time scale 1 the recovery runs every 20 s (``* * * * * */20``).

Statuses (``procrastinate_job_status``) as the harness's: ``todo`` -> queued, ``doing`` -> running,
``succeeded`` -> done, ``failed`` / ``cancelled`` / ``aborted`` -> dead (``failed`` is final unless
somebody calls ``retry_job`` on it; nothing here does). ``aborting`` (legacy, "not used anymore since
v3.0.0" per schema.sql) is passed through unmapped: the harness reports ``unknown``.

Attempts. procrastinate's ``attempts`` column starts at 0 and is incremented when an execution
*ends*: by ``procrastinate_retry_job_v2`` (a retry, from the worker's RetryStrategy or from the
recovery's ``retry_job``) and by ``procrastinate_finish_job_v1`` when it moves a job out of ``doing``.
So for a job that is not ``doing`` it counts the executions procrastinate saw end; for a ``doing`` job
the execution in progress is not in it yet -- procrastinate itself treats it as attempt
``attempts + 1`` (``retry.py``: ``attempts`` is "the number of previous attempts"). ``final_states``
reports ``attempts`` as it is, plus one for a ``doing`` job; the task passes ``job.attempts + 1`` to
the body as its 1-based attempt. ``max_attempts`` (total executions) becomes
``RetryStrategy(max_attempts=max_attempts - 1)`` (procrastinate counts retries) and ``retry=False``
for 1: ``RetryStrategy(max_attempts=0)`` would retry forever (``retry.py``: ``if self.max_attempts and
job.attempts >= self.max_attempts``). The limit rides in the task's name (``pgjc.job.max3``), since a
procrastinate job carries no retry policy of its own: the worker registers the task for its schedule.

``last_error``: procrastinate stores no error text (only ``procrastinate_events`` types): None.
``lease_expired``: for a ``doing`` job, the condition of procrastinate's own
``select_stalled_jobs_by_heartbeat`` (``queries.sql``) with the threshold the workers use (the lease,
from ``for_run``); else None.

Design option ``recovery``: ``on`` (default) the documented periodic task; ``off`` none (what
procrastinate does alone: a stalled job stays ``doing``).

Signals: procrastinate's worker installs SIGINT/SIGTERM handlers on its event loop (``signals.py``:
``on_stop``), never SIGUSR1. Sync tasks run in a thread (asgiref ``sync_to_async``), created after the
harness blocked SIGUSR1, so they inherit the block.
"""

from __future__ import annotations

import asyncio

# The library at import, not at first use: --design procrastinate without the libraries extra is then a
# usage error (workers.load_design) before any server starts, not a failed run after one did.
import procrastinate
from psycopg import sql

from ..core import sqlfile
from ..core.errors import UsageError
from ..workers import hosted
from ..workers.hosted import timing

Q = sqlfile.load(__file__, "procrastinate.sql", "installed", "grantable", "reset", "pending", "final_states")

STATUSES = {"todo": "queued", "doing": "running", "succeeded": "done", "failed": "dead",
            "cancelled": "dead", "aborted": "dead"}  # "aborting" (legacy) is left unmapped on purpose


def task_name(max_attempts: int) -> str:
    """The harness job's task name for a limit of *max_attempts* executions in all."""
    return f"pgjc.job.max{int(max_attempts)}"


def retry_policy(max_attempts: int):
    """procrastinate's retry for at most *max_attempts* executions: it counts retries."""
    retries = int(max_attempts) - 1
    if retries <= 0:
        return False  # not RetryStrategy(max_attempts=0): retry.py reads 0 as "no limit"
    return procrastinate.RetryStrategy(max_attempts=retries)


# procrastinate's intervals: documented defaults (worker.py, manager.py, periodic.py, and
# docs/howto/production/retry_stalled_jobs.md), kept in their ratios to the stalled threshold = the lease.
TIMING = timing.Intervals("procrastinate", anchors={"lease": "stalled threshold"}, intervals=(
    timing.Interval("stalled threshold", 30.0, kind=timing.WAIT,
                    setting="JobManager.get_stalled_jobs(seconds_since_heartbeat=30)"),
    timing.Interval("stalled worker timeout", 30.0, kind=timing.WAIT, setting="Worker(stalled_worker_timeout=30)"),
    timing.Interval("heartbeat interval", 10.0, setting="Worker(update_heartbeat_interval=10)"),
    # The docs' cron "*/10 * * * *"; croniter's seconds column repeats evenly only on a divisor of 60 s.
    timing.Interval("recovery period", 600.0, grid=timing.CRON, recovery=True,
                    setting='retry_stalled_jobs @app.periodic(cron="*/10 * * * *")'),
    timing.Interval("fetch polling interval", 5.0, setting="Worker(fetch_job_polling_interval=5)"),
    timing.Interval("abort polling interval", 5.0, setting="Worker(abort_job_polling_interval=5)"),
    # The periodic deferrer oversleeps each tick by this (periodic.py MARGIN): a lag of the recovery,
    # which no setting changes. Reported, never raising the time scale.
    timing.Interval("periodic deferrer margin", 0.5, grid=timing.FIXED, kind=timing.WAIT, bound=None,
                    setting="periodic.py MARGIN = 0.5"),
))
RECOVERY_ONLY = ("recovery period", "periodic deferrer margin")  # what recovery=off leaves out


class Procrastinate(hosted.HostedDesign):
    name = "procrastinate"
    library = "procrastinate"
    TIMING = TIMING
    # The documented recovery is a periodic task whose cron counts whole seconds (croniter; periodic.py
    # rounds each timestamp to an int): its period, 20 leases, is at least 1 s from time scale 0.05 on.
    # Every other interval of procrastinate is a float.
    min_time_scale = TIMING.min_time_scale()
    OPTIONS = {"recovery": "on (default): the documented retry_stalled_jobs periodic task; off: none"}

    def __init__(self, **options: str):
        super().__init__(**options)
        recovery = self.options.get("recovery", "on")
        if recovery not in ("on", "off"):
            raise UsageError(f"design procrastinate: recovery={recovery!r}; expected on or off")
        self.recovery = recovery == "on"
        if not self.recovery:
            self.TIMING = TIMING.without(*RECOVERY_ONLY)

    # --- the admin side ---------------------------------------------------------------------------
    def install(self, conn, *, worker_role: str) -> None:
        from procrastinate.schema import SchemaManager

        if not conn.execute(Q.installed).fetchone()[0]:
            # procrastinate's whole schema, as `procrastinate schema --apply` applies it (no parameters:
            # psycopg sends it as it is, so its % signs stay literal).
            conn.execute(SchemaManager.get_schema())
        role = sql.Identifier(worker_role)
        for name, kind in conn.execute(Q.grantable).fetchall():
            privileges = "usage, select" if kind == "S" else "select, insert, update, delete"
            conn.execute(sql.SQL("grant {} on {} to {}").format(sql.SQL(privileges), sql.Identifier(name), role))
        # Functions and types are usable by PUBLIC (PostgreSQL's default); they run as the caller.

    def reset(self, conn) -> None:
        conn.execute(Q.reset)

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        """Through procrastinate's own defer (``procrastinate_defer_jobs_v1``), on the admin connection
        inside the runner's transaction (procrastinate's external-connection support): one batch, in
        queue order, so the ids ascend as the schedule does."""
        jobs = list(jobs)
        if not jobs:
            return
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector())
        deferrer = app.configure_task(task_name(max_attempts), connection=conn)
        ids = deferrer.batch_defer(*[hosted.job_args(j) for j in jobs])
        hosted.record_ids(conn, [(j.id, lib) for j, lib in zip(jobs, ids, strict=True)])

    def stale_after(self) -> float | None:
        """The staleness threshold the workers use (get_stalled_jobs' seconds_since_heartbeat): the
        lease in real seconds, known here once :meth:`for_run` ran."""
        return self.intervals(self.schedule)["stalled threshold"] if self.schedule is not None else None

    def pending(self, conn) -> int:
        return conn.execute(Q.pending, {"recovery": self.recovery, "stale": self.stale_after()}).fetchone()[0]

    def final_states(self, conn) -> list[dict]:
        out = []
        for job, tenant, status, attempts, stale in conn.execute(Q.final_states, {"stale": self.stale_after()}):
            out.append({"id": job, "tenant_id": int(tenant) if tenant is not None else None,
                        "status": STATUSES.get(status, status),
                        "attempts": attempts + (1 if status == "doing" else 0),
                        "last_error": None, "lease_expired": stale})
        return out

    # --- the worker side --------------------------------------------------------------------------
    def build_app(self, ctx):
        """procrastinate's App for one forked worker: its connector on the worker role, the harness
        job as a sync task with the retry policy, and (recovery on) the documented periodic task."""
        connector = procrastinate.PsycopgConnector(
            conninfo=ctx.worker_dsn, kwargs={"application_name": f"{ctx.identity}/queue"},
            min_size=1, max_size=2)
        app = procrastinate.App(connector=connector)
        max_attempts = ctx.schedule.max_attempts

        @app.task(name=task_name(max_attempts), retry=retry_policy(max_attempts), pass_context=True)
        def harness_job(context, **args):
            hosted.run_job(ctx, args, attempt=context.job.attempts + 1)

        if self.recovery:
            t = self.intervals(ctx.schedule)
            stale = t["stalled threshold"]

            # docs/howto/production/retry_stalled_jobs.md, as written there; the cron and the
            # threshold derived from the lease in the docs' ratio (every 10 minutes, 30 s: 20 : 1).
            @app.periodic(cron=timing.cron(t["recovery period"]))
            @app.task(name="retry_stalled_jobs", queueing_lock="retry_stalled_jobs", pass_context=True)
            async def retry_stalled_jobs(context, timestamp):
                stalled_jobs = await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=stale)
                for job in stalled_jobs:
                    await app.job_manager.retry_job(job)

        return app

    def worker_options(self, ctx) -> dict:
        def budget(call_next, context, worker):
            """The dequeue budget: once spent, procrastinate's own graceful stop (Worker.stop, safe
            from the task's thread) -- it finishes the job's bookkeeping, takes no other."""
            try:
                return call_next()
            finally:
                if not ctx.may_dequeue():
                    worker.stop()

        # concurrency, listen_notify, shutdown_graceful_timeout: procrastinate's defaults (1, True, None).
        t = self.intervals(ctx.schedule)
        return {"name": ctx.identity, "fetch_job_polling_interval": t["fetch polling interval"],
                "abort_job_polling_interval": t["abort polling interval"],
                "update_heartbeat_interval": t["heartbeat interval"],
                "stalled_worker_timeout": t["stalled worker timeout"], "task_middleware": [budget]}

    def run_worker(self, ctx) -> None:
        if ctx.pool is None:  # the harness's pool for the job body (pool_first opens it before the fork's
            ctx.open_pool()   # run_worker; harness/bench/cost.py calls run_worker directly); procrastinate has its own
        app = self.build_app(ctx)
        asyncio.run(self._run(app, ctx))

    async def _run(self, app, ctx) -> None:
        async with app.open_async():
            await app.run_worker_async(**self.worker_options(ctx))

    def accepted_finishes(self, conn) -> dict[int, dict]:
        from . import finishes  # procrastinate_events per job (adapters/finishes.py)
        return finishes.procrastinate(conn)
