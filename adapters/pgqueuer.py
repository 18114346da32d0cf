"""pgqueuer (PyPI ``pgqueuer``, with its ``psycopg`` extra) hosted under the harness (protocol v2).

What runs is pgqueuer's own code, configured as its documentation says (``docs/guides/heartbeat.md``,
``reliability.md``, ``retry.md``) and never patched:

- schema: ``Queries.install()`` (the same DDL as ``pgq install``) on an async psycopg connection of the
  admin role; the worker role gets the runtime privileges of ``docs/reference/database-permissions.md``.
- enqueue: ``SyncQueries.enqueue`` over ``SyncPsycopgDriver`` on the admin connection, inside the
  runner's transaction: one batch, entrypoint ``pgjc``, priority 0 (pgqueuer dequeues by priority
  then id: queue order), payload the JSON of ``hosted.job_args(job)``.
- worker: ``QueueManager.run`` (the loop ``PgQueuer.run`` starts; no scheduler is needed) on one
  ``psycopg.AsyncConnection`` (``PsycopgDriver``, autocommit, ``application_name`` ``<identity>/queue``),
  at pgqueuer's default concurrency: ``batch_size=10``, ``max_concurrent_tasks`` unlimited -- a worker
  picks up to ten jobs a dequeue and runs every job it picked at once. The lowest pgqueuer allows is
  ``--design-option batch_size=1 --design-option max_concurrent_tasks=2`` (``qm.py``
  ``QueueManager.run`` raises unless ``max_concurrent_tasks >= 2 * batch_size``). The task is ``async``
  (sync entrypoints are rejected, ``core/executors.py``) and runs the body with ``asyncio.to_thread``.
- retry policy, as ``docs/guides/retry.md`` documents it: ``DatabaseRetryEntrypointExecutor``, which
  turns an exception into ``RetryRequested`` until ``job.attempts >= max_attempts`` -- its
  ``max_attempts`` counts *retries* (0-based ``job.attempts``): the schedule's ``max_attempts - 1``.
  pgqueuer keeps no limit on the job: the limit is the worker's configuration.
- stalled-job recovery, as documented (``docs/guides/heartbeat.md``): ``heartbeat_timeout`` = the
  schedule's lease. pgqueuer beats at half of it (``core/heartbeat.py``, through ``HeartbeatBuffer``
  flushing every timeout/8, ``core/buffers.py``); any worker's dequeue re-picks a ``picked`` job whose
  heartbeat is older (``qb.py`` ``build_dequeue_query``, CTE ``next_stale``). The schedule's own
  ``heartbeat`` knob has no counterpart in pgqueuer. (1.6.0 has no ``retry_timer``.)

Design option ``fairness`` (issue 38): ``off`` (default) one entrypoint; ``per-tenant-entrypoint`` one
entrypoint per tenant (``pgjc_t<id>``) registered with ``concurrency_limit=1`` (``qm.py``
``QueueManager.entrypoint``: "``1`` serialises dispatch. Limits are enforced at the database level across
all workers"): one tenant holds at most one job at a time.

Timing (:data:`TIMING`; the table: ``docs/reference/adapters.md``): each interval keeps the ratio of
its default to the 30 s ``heartbeat_timeout``, the schedule's lease.

Statuses: a job's row stays in ``pgqueuer`` while it is ``queued`` / ``picked`` (or ``failed`` when
held, ``on_failure='hold'``, not used here); when it ends, ``log_jobs`` deletes the row and
``pgqueuer_log`` keeps the outcome: ``final_states`` reads the row, else the job's last terminal log
row (:data:`PgQueuer.STATUS`). ``attempts``: pgqueuer's own counter is ``pgqueuer.attempts``, the
retries so far (``retry_job`` adds 1); the executions it counted are that + 1 once the job was
picked, or, for a finished job, its retry records in ``pgqueuer_log`` + 1 (``pgqueuer.sql``). A stale
re-pick (its worker died or stalled) increments nothing -- pgqueuer has no re-pick counter
(``docs/guides/reliability.md``, "Poison jobs"), so such executions are not counted, and
``attempts-counted`` says so; its ``picked`` log rows record every claim, but pgqueuer counts nothing
from them, and neither does this adapter. The body is told ``attempt = job.attempts + 1``.

Not the library's: a side table (``adapters/pgqueuer.sql``) with the tenant of each job (the log
keeps no payload, and the row is deleted when the job ends).

Versions (issue 48, the corpus runs older ones beside the pinned 1.6.0): ``>= 1.0`` is hosted as above;
``< 1.0`` (:data:`LEGACY`; 0.21-0.26, the corpus's cases) has the 0.x layout (``pgqueuer.db``,
``pgqueuer.queries``, ``pgqueuer.qm``, ``pgqueuer.models``), recovers a stale job by the entrypoint's
``retry_timer`` (= the lease, in the place of ``heartbeat_timeout``; the heartbeat interval and its
buffer's flush are pgqueuer's own functions of it, which #431 changed in 0.24.0), has no ``attempts``
column and no database retry: an exception ends the job ``exception`` (its default executor), the body
is told attempt 1 on every pick, and ``final_states`` is ``final_states_0x``. Within 1.x, before 1.5
(:data:`SCHEMA_CHECK`) the schema is found by ``has_table`` (no ``schema_is_installed``), and before 1.3
(:data:`AGGREGATION`) ``QueueManager.run`` takes no ``log_aggregation_interval`` (the corpus's 1.0.x case).

Hazards, left as pgqueuer has them: the finish is buffered (``JobStatusLogBuffer``, flushed by a task
once the body has returned and the job's ``Heartbeat`` has stopped), so a worker killed in between
leaves a finished job ``picked``, and it runs again; ``dequeues`` is approximate (a worker holds up
to ten picked jobs a dequeue, and runs what it picked); a crash kills every job its worker picked;
PgBouncer in transaction mode cannot carry its LISTEN.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import re
from datetime import timedelta

# The library at import (its modules below are imported where used): --design pgqueuer without the
# libraries extra is then a usage error (workers.load_design) before any server starts.
import pgqueuer  # noqa: F401
import psycopg
from psycopg import sql

from ..core import sqlfile
from ..core.errors import UsageError
from ..workers import hosted
from ..workers.hosted.declared import DeclaredDesign, admin_dsn
from ..workers.hosted.protocol import body_threads
from ..workers.hosted.timing import FIXED, WAIT, Interval, Intervals
from . import finishes

Q = sqlfile.load(__file__, "pgqueuer.sql", "create_side_tables", "reset", "record_job", "pending",
                 "final_states", "accepted_finishes", "final_states_0x")


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


VERSION = importlib.metadata.version("pgqueuer")
LEGACY = _release(VERSION) < (1, 0)  # the 0.x layout and recovery (the module docstring, "Versions")
# 1.x releases before these lack what the adapter otherwise uses (the module docstring, "Versions"):
SCHEMA_CHECK = _release(VERSION) >= (1, 5)  # Queries.schema_is_installed (1.5.0; absent in 1.4.0)
AGGREGATION = _release(VERSION) >= (1, 3)  # QueueManager.run(log_aggregation_interval=) (v1.3.0, #707)

ENTRYPOINT = "pgjc"

TABLES = ("pgqueuer", "pgqueuer_log", "pgqueuer_statistics", "pgqueuer_schedules")
SEQUENCES = tuple(f"{t}_id_seq" for t in TABLES)

# pgqueuer's intervals (core/qm.py QueueManager.run and its fields, core/buffers.py, core/executors.py,
# adapters/drivers/psycopg.py), kept in their ratios to heartbeat_timeout = the lease. A stale job is
# re-picked by a dequeue: an idle worker dequeues on a NOTIFY or after dequeue_timeout, its recovery
# period. The notify wait: every statement goes through one connection whose NOTIFY watcher holds its
# lock in notifies(timeout=1.0), so a heartbeat flush may wait 1 s. A beat lands at most T/2 + 1.2*T/8
# (the jittered flush) + 1 s after the last; through one failed flush at 0.8 T + 2 s, which pgqueuer's
# design keeps within T (qm.py: "T/8 keeps a live job within 0.8 T through one failed flush"):
# T >= 10 s, 3x the documented 1 s : 30 s. Measured: at T = 1 s 12 of 20 fault-free jobs ran twice
# (each once with the wait cut to 0.02 s, a diagnosis never shipped); at T = 3 s each once, a beat
# 2.95 s after the last.
TIMING = Intervals("pgqueuer", anchors={"lease": "heartbeat timeout"}, intervals=(
    Interval("heartbeat timeout", 30.0, kind=WAIT, setting="QueueManager.run(heartbeat_timeout=30 s)"),
    Interval("heartbeat interval", 15.0, setting="Heartbeat(heartbeat_timeout / 2), set by pgqueuer"),
    Interval("heartbeat flush", 3.75,
             setting="HeartbeatBuffer(timeout=heartbeat_timeout / 8), set by pgqueuer"),
    Interval("dequeue timeout", 30.0, kind=WAIT, recovery=True,
             setting="QueueManager.run(dequeue_timeout=30 s)"),
    Interval("log aggregation interval", 30.0, setting="QueueManager.run(log_aggregation_interval=30 s)"),
    Interval("retry initial delay", 1.0, kind=WAIT,
             setting="DatabaseRetryEntrypointExecutor(initial_delay=1 s)"),
    Interval("retry max delay", 300.0, kind=WAIT, setting="DatabaseRetryEntrypointExecutor(max_delay=5 min)"),
    Interval("notify wait", 1.0, grid=FIXED, kind=WAIT, bound=3.0,
             setting="watch_notifies: notifies(timeout=1.0)"),
    Interval("status log flush", 0.1, grid=FIXED, kind=WAIT, bound=None,
             setting="JobStatusLogBuffer timeout 0.1 s"),
    Interval("minimum dequeue poll", 0.1, grid=FIXED, bound=None,
             setting="QueueManager.min_dequeue_poll_interval"),
    Interval("listener health check", 10.0, grid=FIXED, bound=None,
             setting="_run_periodic_health_check(10 s)"),
))


def _positive(name: str, value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise UsageError(f"design pgqueuer: option {name}={value!r} is not a number") from None
    if x <= 0:
        raise UsageError(f"design pgqueuer: option {name} must be > 0")
    return x


class PgQueuer(DeclaredDesign):
    name = "pgqueuer"
    library = "pgqueuer"
    STATUS = {
        "queued": "queued",  # waiting, or waiting for a retry (retry_job re-queues in place)
        "picked": "running",  # a worker holds it (or held it, and its heartbeat is stale)
        "successful": "done",  # the task returned
        "exception": "dead",  # terminal failure (retries spent), row deleted
        "failed": "dead",  # held terminal failure (only with on_failure='hold')
        "canceled": "dead",  # cancelled (mark_job_as_cancelled); not done by the harness
        "deleted": "dead",  # removed unrun (clear_queue); not done by the harness
    }  # anything else ("absent": no row, no terminal record) passed through: unknown, never guessed
    SQL = Q.replacing(final_states="final_states_0x") if LEGACY else Q
    FINISHES = staticmethod(finishes.pgqueuer)  # pgqueuer_log, per job
    TIMING = TIMING
    min_time_scale = TIMING.min_time_scale()  # 10: the fixed 1 s notify wait (TIMING, "notify wait")
    # Its recovery is its dequeue: one statement picks queued jobs and re-picks picked ones whose heartbeat
    # is older than heartbeat_timeout (qb.py build_dequeue_query, the next_stale CTE, :424-439). One digest
    # per shape it renders (capacity-gated under fairness=per-tenant-entrypoint, budget-gated with
    # max_concurrent_tasks): tests/unit/test_recovery_statements.py derives them.
    recovery_statements = ("7dc68e64", "f5ab79a9", "316c1f4b", "29969d33")
    OPTIONS = {
        "batch_size": "QueueManager.run batch_size (default 10, pgqueuer's; 1 is the lowest)",
        "max_concurrent_tasks": "QueueManager.run max_concurrent_tasks (default unlimited, pgqueuer's; "
                                "at least 2 * batch_size: batch_size=1 max_concurrent_tasks=2 is the lowest)",
        "heartbeat_timeout": "real seconds (default: the schedule's lease; the other intervals keep theirs)",
        "fairness": "off (default): one entrypoint; per-tenant-entrypoint: one per tenant, "
                    "concurrency_limit=1",
    }

    def __init__(self, **options: str):
        super().__init__(**options)
        self.batch_size = int(_positive("batch_size", options.get("batch_size", "10")))
        self.max_concurrent_tasks = (int(_positive("max_concurrent_tasks", options["max_concurrent_tasks"]))
                                     if "max_concurrent_tasks" in options else None)
        self.heartbeat_timeout = (_positive("heartbeat_timeout", options["heartbeat_timeout"])
                                  if "heartbeat_timeout" in options else None)
        # Unlimited by default: QueueManager.run(max_concurrent_tasks=None) (qm.py:395, "a hard cap on this
        # worker's picked jobs"; None: none), and fetch_jobs dequeues batch after batch until the queue is
        # empty (qm.py:244-270), every job picked dispatched at once (qm.py:472-484).
        self.concurrency = self.max_concurrent_tasks
        self.per_tenant = self.choice("fairness", ("off", "per-tenant-entrypoint")) == "per-tenant-entrypoint"
        # per-tenant-entrypoint: each tenant's entrypoint at concurrency_limit=1 (run_worker), "enforced at
        # the database level across all workers" (qm.py, QueueManager.entrypoint)
        self.tenant_cap = 1 if self.per_tenant else None

    def entrypoint(self, tenant) -> str:
        """The entrypoint a job of *tenant* is enqueued to (fairness=per-tenant-entrypoint: its own)."""
        return f"{ENTRYPOINT}_t{tenant}" if self.per_tenant else ENTRYPOINT

    # --- the runner's side (admin connection) ---------------------------------------------------
    def install(self, conn, *, worker_role: str) -> None:
        asyncio.run(self._install(admin_dsn(conn)))
        conn.execute(Q.create_side_tables)
        role = sql.Identifier(worker_role)
        tables = sql.SQL(", ").join(map(sql.Identifier, TABLES))
        conn.execute(sql.SQL("grant select, insert, update, delete on {} to {}").format(tables, role))
        seqs = sql.SQL(", ").join(map(sql.Identifier, SEQUENCES))
        conn.execute(sql.SQL("grant usage, select on sequence {} to {}").format(seqs, role))
        conn.execute(sql.SQL("grant execute on function fn_pgqueuer_changed() to {}").format(role))

    @staticmethod
    async def _install(dsn: str) -> None:
        PsycopgDriver, Queries = _drivers()

        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            queries = Queries(PsycopgDriver(aconn))
            installed = (await queries.schema_is_installed() if SCHEMA_CHECK
                         else await queries.has_table("pgqueuer"))  # before 1.5: no schema_is_installed
            if not installed:  # a database cloned from a template has it
                await queries.install()

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        if LEGACY:
            from pgqueuer.db import SyncPsycopgDriver
            from pgqueuer.queries import SyncQueries
        else:
            from pgqueuer.adapters.drivers.psycopg import SyncPsycopgDriver
            from pgqueuer.adapters.persistence.queries import SyncQueries

        jobs = list(jobs)
        if not jobs:
            return
        payloads: list[bytes | None] = [json.dumps(hosted.job_args(j)).encode() for j in jobs]
        queries = SyncQueries(SyncPsycopgDriver(conn))
        ids = queries.enqueue([self.entrypoint(j.tenant) for j in jobs], payloads, [0] * len(jobs))
        hosted.record_ids(conn, [(j.id, lib) for j, lib in zip(jobs, ids, strict=True)])
        with conn.cursor() as cur:
            cur.executemany(Q.record_job, [{"job": j.id, "library_id": lib, "tenant": j.tenant}
                                           for j, lib in zip(jobs, ids, strict=True)])

    def sql_params(self) -> dict:
        """The heartbeat_timeout the workers run with, real seconds (the lease, from ``for_run``)."""
        return {"timeout": self.heartbeat_timeout or self.lease}

    def timing_notes(self, schedule) -> list[str]:
        lease = schedule.seconds(schedule.timing.lease)
        given = self.heartbeat_timeout
        return super().timing_notes(schedule) + ([] if given is None else [
            f"pgqueuer: heartbeat timeout is {given:g} s (--design-option), {given / lease:.3g}× the lease"])

    # --- the worker's side (forked worker process) ----------------------------------------------
    def run_worker(self, ctx) -> None:
        if self.ready(ctx):  # the pool opened once here rather than by two task threads at once
            asyncio.run(self._run(ctx))

    async def _run(self, ctx) -> None:
        PsycopgDriver, Queries = _drivers()
        if LEGACY:
            from pgqueuer.qm import QueueManager
        else:
            from pgqueuer.core.qm import QueueManager

        body_threads(ctx)  # asyncio.to_thread's default threads would bound the bodies, not pgqueuer
        t = self.intervals(ctx.schedule)
        heartbeat_timeout = self.heartbeat_timeout or t["heartbeat timeout"]
        aconn = await psycopg.AsyncConnection.connect(ctx.worker_dsn, autocommit=True,
                                                      application_name=f"{ctx.identity}/queue")
        ctx.log.write("connect", backend=aconn.info.backend_pid, purpose="queue")
        # 1.x takes the queries, 0.x the driver (it builds its queries itself)
        qm = QueueManager(PsycopgDriver(aconn) if LEGACY else Queries(PsycopgDriver(aconn)))

        def executor(parameters):
            from pgqueuer.core.executors import DatabaseRetryEntrypointExecutor  # 1.x only

            return DatabaseRetryEntrypointExecutor(
                parameters=parameters,
                max_attempts=ctx.schedule.max_attempts - 1,  # it counts retries: job.attempts is 0-based
                initial_delay=timedelta(seconds=t["retry initial delay"]),
                max_delay=timedelta(seconds=t["retry max delay"]),  # backoff_multiplier: its default, 2
            )

        async def task(job) -> None:  # pgqueuer's Job (domain.models in 1.x, models in 0.x)
            assert job.payload is not None  # enqueue gives every job its arguments
            args = json.loads(job.payload)
            attempt = 1 if LEGACY else job.attempts + 1  # 0.x counts no attempt
            try:
                await asyncio.to_thread(hosted.run_job, ctx, args, attempt=attempt)
            finally:
                if not ctx.may_dequeue():  # the budget is spent: pgqueuer's own graceful stop
                    qm.shutdown.set()

        # 1.x: the database retry and run(heartbeat_timeout); 0.x: the default executor (no retry) and the
        # entrypoint's retry_timer, which is 0.x's stale-job recovery
        recovery = ({"retry_timer": timedelta(seconds=heartbeat_timeout)} if LEGACY
                    else {"executor_factory": executor})
        if self.per_tenant:  # the schedule's tenants, each serialised across all workers
            for name in sorted({self.entrypoint(j.tenant) for j in ctx.schedule.jobs}):
                qm.entrypoint(name, concurrency_limit=1, **recovery)(task)
        else:
            qm.entrypoint(ENTRYPOINT, **recovery)(task)

        if LEGACY:  # 0.x: no CLI handler to borrow; the worker's own SIGTERM handler sets the event
            loop = asyncio.get_running_loop()
            ctx.when_terminated(lambda: loop.call_soon_threadsafe(qm.shutdown.set))
        else:
            # a deploy's SIGTERM: pgqueuer's own handler, as its CLI installs it (shutdown.set on
            # SIGTERM/SIGINT: pgqueuer/adapters/cli/supervisor.py:35-44); it replaces the worker's own
            # while the queue runs
            from pgqueuer.adapters.cli.supervisor import setup_signal_handlers

            setup_signal_handlers(qm.shutdown)
        run: dict = {"dequeue_timeout": timedelta(seconds=t["dequeue timeout"]),
                     "batch_size": self.batch_size, "max_concurrent_tasks": self.max_concurrent_tasks}
        if not LEGACY:  # 1.x's own intervals; 0.x derives them from retry_timer
            run.update(heartbeat_timeout=timedelta(seconds=heartbeat_timeout))
        if AGGREGATION:  # before 1.3 the log is not aggregated by the worker
            run.update(log_aggregation_interval=timedelta(seconds=t["log aggregation interval"]))
        try:
            await qm.run(**run)
        finally:
            await aconn.close()


def _drivers():
    """pgqueuer's async psycopg driver and its queries class, where this version keeps them."""
    if LEGACY:
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import Queries
    else:
        from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
        from pgqueuer.adapters.persistence.queries import Queries
    return PsycopgDriver, Queries
