"""procrastinate (3.x, psycopg 3) hosted under the harness: ``--design procrastinate``.

What runs is procrastinate's own: its schema (``SchemaManager.get_schema()``, ``sql/schema.sql``), its
defer (``procrastinate_defer_jobs_v1`` through ``Task.configure(connection=...).batch_defer``), its
asyncio worker (``App.run_worker_async``, its default concurrency 1, ``listen_notify``, the sync task in
a thread), its fetch (``procrastinate_fetch_job_v2``), its retry policy (``RetryStrategy`` on the task,
applied by ``worker.py: Worker._process_job`` to an exception the task raised), its finish
(``procrastinate_finish_job_v1`` / ``procrastinate_retry_job_v2``), its worker heartbeats
(``Worker._update_heartbeat``, ``procrastinate_workers.last_heartbeat``), the pruning of stalled
workers at worker start, and the stalled-job recovery its documentation recommends
(docs/howto/production/retry_stalled_jobs.md: a periodic task, ``queueing_lock="retry_stalled_jobs"``,
that calls ``job_manager.get_stalled_jobs()`` and ``job_manager.retry_job(job)`` for each) -- copied
as documented. Its intervals (:data:`TIMING`; the table: ``docs/reference/adapters.md``) keep the
ratios of its documented defaults, the schedule's lease as the 30 s stalled threshold: the recovery
runs every 20 leases, as the documented cron runs every 10 minutes, and stretches the run's stall
and deadline limits by that period.

Statuses: ``failed`` is final unless somebody calls ``retry_job`` on it (nothing here does);
``aborting`` (legacy, "not used anymore since v3.0.0" per schema.sql) is left unmapped: ``unknown``.

Attempts. procrastinate's ``attempts`` column starts at 0 and is incremented when an execution
*ends*: by ``procrastinate_retry_job_v2`` (a retry, from the worker's RetryStrategy or from the
recovery's ``retry_job``) and by ``procrastinate_finish_job_v1`` when it moves a job out of ``doing``;
procrastinate treats a ``doing`` job's execution as attempt ``attempts + 1`` (``retry.py``), and so do
``final_states`` and the task (the body's 1-based attempt). ``max_attempts`` (total executions) becomes
``RetryStrategy(max_attempts=max_attempts - 1)`` (procrastinate counts retries), ``retry=False`` for 1:
``RetryStrategy(max_attempts=0)`` would retry forever (``retry.py``: ``if self.max_attempts and
job.attempts >= self.max_attempts``). The limit rides in the task's name (``pgjc.job.max3``): a
procrastinate job carries no retry policy of its own; the worker registers the task for its schedule.

``last_error``: None (procrastinate stores no error text). ``lease_expired``: for a ``doing`` job, the
condition of its own ``select_stalled_jobs_by_heartbeat`` with the workers' threshold.

Design option ``recovery``: ``on`` (default) the documented periodic task; ``off`` none (what
procrastinate does alone: a stalled job stays ``doing``).

Design option ``fairness`` (issue 38): ``off`` (default) no lock, procrastinate's fetch takes the oldest
job of the highest priority; ``per-tenant-lock`` defers each job with ``lock="tenant:<id>"`` -- its
documented way to keep jobs apart (tasks.py ``configure``: "lock: No two jobs with the same lock string
can run simultaneously"; ``procrastinate_fetch_job_v2`` skips a job whose lock a ``doing`` job holds), so
one tenant holds at most one worker at a time. Not ``queueing_lock``: it refuses a second waiting job.

Signals: procrastinate's worker installs SIGINT/SIGTERM handlers on its event loop (``signals.py``:
``on_stop``), never SIGUSR1. Sync tasks run in a thread (asgiref ``sync_to_async``), created after the
harness blocked SIGUSR1, so they inherit the block.
"""

from __future__ import annotations

import asyncio
import itertools

# The library at import, not at first use: --design procrastinate without the libraries extra is then a
# usage error (workers.load_design) before any server starts, not a failed run after one did.
import procrastinate

from ..core import sqlfile
from ..workers import hosted
from ..workers.hosted import timing
from ..workers.hosted.declared import DeclaredDesign, grant
from . import finishes

Q = sqlfile.load(__file__, "procrastinate.sql", "installed", "grantable", "reset", "pending", "final_states",
                 "accepted_finishes")


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
    timing.Interval("stalled worker timeout", 30.0, kind=timing.WAIT,
                    setting="Worker(stalled_worker_timeout=30)"),
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


class Procrastinate(DeclaredDesign):
    name = "procrastinate"
    library = "procrastinate"
    STATUS = {"todo": "queued", "doing": "running", "succeeded": "done", "failed": "dead",
              "cancelled": "dead", "aborted": "dead"}  # "aborting" (legacy) is left unmapped on purpose
    SQL = Q
    FINISHES = staticmethod(finishes.procrastinate)  # procrastinate_events, per job
    TIMING = TIMING
    # The documented recovery is a periodic task whose cron counts whole seconds (croniter; periodic.py
    # rounds each timestamp to an int): its period, 20 leases, is at least 1 s from time scale 0.05 on.
    # Every other interval of procrastinate is a float.
    min_time_scale = TIMING.min_time_scale()
    OPTIONS = {"recovery": "on (default): the documented retry_stalled_jobs periodic task; off: none",
               "fairness": "off (default): no lock; per-tenant-lock: each job deferred with lock=tenant:<id> "
                           "(one job of a tenant runs at a time)"}
    concurrency = 1  # worker.py:28 WORKER_CONCURRENCY = 1, "maximum number of parallel jobs" (run_worker's)
    # Its recovery's statements, as strike points (digests of procrastinate's own texts, sql/queries.sql;
    # tests/unit/test_recovery_statements.py derives them): the stalled-jobs query of the documented
    # retry_stalled_jobs task (select_stalled_jobs_by_heartbeat, manager.py:267), its retry_job
    # (manager.py:578) and the prune of stalled workers at every worker's start (prune_stalled_workers,
    # manager.py:1039, from worker.py:446). retry_job is the worker's own retry of a failed job too.
    recovery_statements = ("3f74fb2d", "10c5ce8b", "4fbfe16c")

    def __init__(self, **options: str):
        super().__init__(**options)
        self.recovery = self.choice("recovery", ("on", "off")) == "on"
        self.tenant_lock = self.choice("fairness", ("off", "per-tenant-lock")) == "per-tenant-lock"
        # per-tenant-lock: lock=tenant:<id> at enqueue, "No two jobs with the same lock string can run
        # simultaneously" (tasks.py, configure)
        self.tenant_cap = 1 if self.tenant_lock else None
        if not self.recovery:
            self.TIMING = TIMING.without(*RECOVERY_ONLY)

    # --- the admin side ---------------------------------------------------------------------------
    def install(self, conn, *, worker_role: str) -> None:
        from procrastinate.schema import SchemaManager

        if not conn.execute(Q.installed).fetchone()[0]:
            # procrastinate's whole schema, as `procrastinate schema --apply` applies it (no parameters:
            # psycopg sends it as it is, so its % signs stay literal).
            conn.execute(SchemaManager.get_schema())
        names = conn.execute(Q.grantable).fetchall()
        grant(conn, worker_role, "select, insert, update, delete", [n for n, kind in names if kind == "r"])
        grant(conn, worker_role, "usage, select", [n for n, kind in names if kind == "S"], on="sequence")
        # Functions and types are usable by PUBLIC (PostgreSQL's default); they run as the caller.

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        """Through procrastinate's own defer (``procrastinate_defer_jobs_v1``), on the admin connection
        inside the runner's transaction (procrastinate's external-connection support): one batch, in
        queue order, so the ids ascend as the schedule does."""
        jobs = list(jobs)
        if not jobs:
            return
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector())
        ids: list[int] = []
        # per-tenant-lock: one batch per run of one tenant's jobs (a lock is per configure), in queue order
        runs = itertools.groupby(jobs, key=lambda j: j.tenant) if self.tenant_lock else [(None, jobs)]
        for tenant, run in runs:
            lock = f"tenant:{tenant}" if self.tenant_lock else None
            deferrer = app.configure_task(task_name(max_attempts), connection=conn, lock=lock)
            ids += deferrer.batch_defer(*[hosted.job_args(j) for j in run])
        hosted.record_ids(conn, [(j.id, lib) for j, lib in zip(jobs, ids, strict=True)])

    def sql_params(self) -> dict:
        """The staleness threshold the workers use (get_stalled_jobs' seconds_since_heartbeat): the
        lease in real seconds, known once :meth:`for_run` ran."""
        return {"recovery": self.recovery, "stale": self.intervals(self.schedule).get("stalled threshold")}

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
        return {"name": ctx.system_id, "fetch_job_polling_interval": t["fetch polling interval"],
                "abort_job_polling_interval": t["abort polling interval"],
                "update_heartbeat_interval": t["heartbeat interval"],
                "stalled_worker_timeout": t["stalled worker timeout"], "task_middleware": [budget]}

    def run_worker(self, ctx) -> None:
        if self.ready(ctx):
            asyncio.run(self._run(self.build_app(ctx), ctx))

    async def _run(self, app, ctx) -> None:
        async with app.open_async():
            await app.run_worker_async(**self.worker_options(ctx))
