"""chancy (TkTech/chancy, PyPI ``chancy``) hosted under protocol v2 (``workers/hosted/protocol.py``).

What runs is chancy's own code: its migrations (``Chancy.migrate``), its push
(``Chancy.sync_push_many_ex`` on the runner's transaction), its ``Worker`` (``fetch_jobs`` claims with
``FOR UPDATE SKIP LOCKED`` and sets ``state = 'running'``; completions are queued in memory and written
by ``Worker.flush`` once a second), its retry policy (``Executor.on_job_completed``: ``attempts + 1``,
``retrying`` until ``attempts + 1 >= max_attempts``, then ``failed``), its heartbeat
(``Worker.announce_worker`` into ``chancy_workers``) and its default ``Leadership`` and ``Recovery``
plugins (``Recovery.recover``: every ``running`` job whose ``taken_by`` worker was not seen within
``heartbeat_timeout`` goes back to ``pending`` with ``max_attempts + 1`` and its claim cleared).

Configuration: chancy's defaults unless a ``--design-option`` says otherwise: one queue, ``default``,
with chancy's default **process executor** (each job in a pool child it spawns, where
:mod:`workers.hosted.spawned` rebuilds the body's context; the strike signal, also chancy's cancel
signal there, is blocked and taken only at a point) and default concurrency (the core count);
``executor=threaded``, ``concurrency=N``, ``eager_polling=true``. Intervals (:data:`TIMING`; the table:
``docs/reference/adapters.md``) keep the ratios of chancy's documented defaults, the lease as its 90 s
heartbeat timeout; the whole-second poll and the fixed 1 s flush are broken ratios the run reports.
The other default plugins (Pruner, Metrics, Workflow) stay. ``fairness=per-tenant-queue`` (issue 38;
default ``off``): a queue per tenant of the schedule, declared at reset (``queue.py``: "Each queue has a
name, concurrency level"), every worker polling each one up to its own concurrency.

Grants: chancy's worker calls ``Chancy.is_up_to_date`` at start, which runs ``CREATE TABLE IF NOT
EXISTS chancy_schema_version`` (``Migrator.upsert_version_table``): PostgreSQL checks CREATE on the
schema before it sees the table exists, so the worker role gets CREATE on schema ``public``
(never ownership of chancy's tables, never BYPASSRLS).

``attempts`` is chancy's ``attempts`` column as it is: chancy adds 1 when an execution *completes*
(succeeds or raises, ``Executor.on_job_completed``); an execution cut short by a crash or recovered
from a lost worker is not counted (``Recovery.recover`` leaves ``attempts`` alone and raises
``max_attempts`` instead). The attempt a task believes it runs is ``attempts + 1`` at claim (1-based),
so an execution that re-runs a recovered job logs the same attempt number as the one it replaces.
``last_error``: the last line of the last error's traceback. ``lease_expired``: a ``running`` job
whose worker has no live ``chancy_workers`` row -- exactly what ``Recovery.recover`` would take.
"""

import asyncio
import logging
import os
import threading
from pathlib import Path

import chancy as chancy_lib
from chancy import Job, Queue, QueuedJob
from chancy.plugins.leadership import Leadership
from chancy.plugins.recovery import Recovery
from chancy.worker import Worker
from psycopg import conninfo, sql
from psycopg.rows import dict_row

from ..core import sqlfile
from ..workers import hosted
from ..workers.hosted import spawned, timing
from ..workers.hosted.declared import DeclaredDesign, admin_dsn, grant
from . import finishes

Q = sqlfile.load(__file__, "chancy.sql", "tables", "unlogged_tables", "sequences", "pending", "final_states",
                 "accepted_finishes", "drop_tenant_queues")
QUEUE = "default"
PREFIX = "chancy_"  # chancy.sql names its tables with it
TASK = f"{__name__}.hosted_job"  # the importable name chancy's executor resolves (executors/base.py)

# The forked worker's context and stop request, set by run_worker (one worker per process).
_ctx = None
_stop: "tuple[asyncio.AbstractEventLoop, asyncio.Event] | None" = None


def hosted_job(args: dict, *, context: QueuedJob) -> None:
    """The chancy task: runs the harness's body where chancy's executor runs it -- a pool child it
    spawned (its default ``ProcessExecutor``: the worker context is rebuilt there,
    :mod:`workers.hosted.spawned`) or an executor thread (``executor=threaded``). ``context`` is injected
    by chancy (a keyword-only parameter annotated QueuedJob, ``Executor.get_function_and_kwargs``)."""
    ctx = _ctx if _ctx is not None else spawned.context()
    try:
        hosted.run_job(ctx, args, attempt=context.attempts + 1)
    finally:
        if not ctx.may_dequeue() and _stop is not None:
            loop, event = _stop
            loop.call_soon_threadsafe(event.set)


def _truncate(conn, tables: list[str], *, restart_identity: bool) -> None:
    """Empty *tables* in one ``TRUNCATE ... CASCADE``; their owned sequences restart at 1 only with
    *restart_identity*. Nothing when *tables* is empty."""
    if tables:
        restart = sql.SQL(" restart identity" if restart_identity else "")
        conn.execute(sql.SQL("truncate {}{} cascade").format(
            sql.SQL(", ").join(sql.Identifier(t) for t in tables), restart))


def _app(dsn: str, *, plugins=(), log=None):
    log = log or logging.getLogger("chancy")
    return chancy_lib.Chancy(dsn, plugins=list(plugins), prefix=PREFIX, log=log)


def _worker_log(directory: str | None, identity: str) -> logging.Logger:
    """chancy's logger for this worker: its records go to the worker's log as any library's do, and
    with the ``log`` option also to ``DIR/<identity>.chancy.txt`` at INFO (recoveries, pulls)."""
    log = logging.getLogger("chancy")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(Path(directory) / f"{identity}.chancy.txt")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    return log


# chancy's intervals as its code documents them (worker.py Worker, plugins/recovery.py,
# plugins/leadership.py, queue.py Queue): the lease is the heartbeat timeout (90 s); the rest keep their
# ratio to it.
TIMING = timing.Intervals("chancy", anchors={"lease": "heartbeat timeout"}, intervals=(
    timing.Interval("heartbeat timeout", 90.0, kind=timing.WAIT, setting="Worker(heartbeat_timeout=90)"),
    timing.Interval("heartbeat interval", 30.0, setting="Worker(heartbeat_poll_interval=30)"),
    timing.Interval("recovery period", 60.0, recovery=True, setting="Recovery(poll_interval=60)"),
    timing.Interval("leadership poll", 60.0, setting="Leadership(poll_interval=60)"),
    timing.Interval("leadership timeout", 120.0, kind=timing.WAIT, setting="Leadership(timeout=120)"),
    # An INTEGER column: 1 s is the least. It only delays a fetch (reported, never raising the scale).
    timing.Interval("queue polling interval", 5.0, grid=timing.WHOLE, bound=None,
                    setting="Queue(polling_interval=5)"),
    # Not a parameter: completions are written once a second (reported; see min_time_scale).
    timing.Interval("completion flush", 1.0, grid=timing.FIXED, bound=None,
                    setting="Worker.send_outgoing_interval = 1"),
    # Not an interval of chancy's: how long the process executor's start holds the event loop (a
    # spawned Manager, executors/process.py ProcessExecutor.__init__), measured here with
    # PYTHONASYNCIODEBUG (0.33-0.37 s idle; up to ~2 s with four runs at once). Reported only.
    timing.Interval("process executor start", 0.35, grid=timing.FIXED, kind=timing.WAIT, bound=None,
                    setting="ProcessExecutor.__init__: multiprocessing Manager() in the event loop"),
))
# The process executor's start holds the event loop (TIMING "process executor start": 0.35 s idle, up
# to ~2 s loaded) with chancy's heartbeat transaction open and no heartbeat written: against a lease
# of 1 article second it reads as a dead worker and a held horizon; at 3 the timeout is 3 s.
PROCESS_MIN_TIME_SCALE = 3.0
EXECUTORS = {"process": chancy_lib.Chancy.Executor.Process, "threaded": chancy_lib.Chancy.Executor.Threaded}


def _queue(options: dict, polling: int = 1, name: str = QUEUE) -> Queue:
    """chancy's ``Queue`` defaults (``queue.py``) unless an option says otherwise: its process
    executor, concurrency None (the core count, ``ProcessExecutor.get_default_concurrency``), no eager
    polling; *polling* whole seconds (an INTEGER column, :data:`TIMING`)."""
    concurrency = options.get("concurrency")
    return Queue(name, concurrency=int(concurrency) if concurrency else None,
                 executor=EXECUTORS[options.get("executor", "process")], polling_interval=polling,
                 eager_polling=options.get("eager_polling", "false") == "true")


class Chancy(DeclaredDesign):
    name = "chancy"
    library = "chancy"
    STATUS = {"pending": "queued", "retrying": "queued", "running": "running", "succeeded": "done",
              "failed": "dead"}
    SQL = Q
    FINISHES = staticmethod(finishes.chancy)  # chancy_jobs' last accepted completion, per job
    TIMING = TIMING
    # Threaded: a job that raised is written back up to 1 s later (the completion flush) and fetched
    # up to 1 s after that (the queue poll): 2 s with no new record, inside the supervisor's stall limit
    # (max_runtime + 4 leases = 9 article seconds) from time scale 0.25. Process: PROCESS_MIN_TIME_SCALE.
    min_time_scale = PROCESS_MIN_TIME_SCALE
    # Its Recovery plugin's one statement (plugins/recovery.py:91-122: running jobs of a worker missing or
    # stale back to pending), by its digest (tests/unit/test_recovery_statements.py derives it).
    recovery_statements = ("29892699",)
    pool_first = False  # the process executor's children open pools of their own
    OPTIONS = {"log": "a directory to write chancy's own log into (INFO, one file per worker)",
               "executor": "process (chancy's default: each job in a spawned pool child) or threaded",
               "concurrency": "jobs at once per worker (default chancy's: the machine's core count)",
               "eager_polling": "true: fetch again as soon as a job completes (default false, chancy's)",
               "fairness": "off (default): one queue; per-tenant-queue: a queue per tenant, each with its "
                           "own concurrency (queue.py: 'Each queue has a name, concurrency level')"}

    def __init__(self, **options: str):
        super().__init__(**options)
        self.executor = self.choice("executor", tuple(EXECUTORS))
        # chancy's Queue(concurrency=None) takes the executor's default: the core count for its process
        # executor (executors/process.py:365-378), min(32, cores + 4) threads for its threaded one
        # (executors/thread.py:61-77; 3.11 has no os.process_cpu_count). Each process child runs one.
        cores = os.cpu_count() or 1
        default = cores if self.executor == "process" else min(32, cores + 4)
        self.concurrency = self.whole("concurrency", default)
        self.choice("eager_polling", ("false", "true"))
        self.per_tenant = self.choice("fairness", ("off", "per-tenant-queue")) == "per-tenant-queue"
        if self.executor == "threaded":  # the body runs here, on the harness's pool: open it first
            self.pool_first = True
            self.min_time_scale = 0.25
            self.TIMING = TIMING.without("process executor start")

    def install(self, conn, *, worker_role: str) -> None:
        async def migrate():
            async with _app(admin_dsn(conn)) as app:
                await app.migrate()
                await app.declare(_queue(self.options), upsert=True)

        asyncio.run(migrate())
        # CREATE: Worker.start -> Chancy.is_up_to_date -> Migrator.upsert_version_table runs CREATE
        # TABLE IF NOT EXISTS, which PostgreSQL checks against the schema before it finds the table.
        grant(conn, worker_role, "usage, create", ["public"], on="schema")
        tables, sequences = ([n for (n,) in conn.execute(q)] for q in (Q.tables, Q.sequences))
        grant(conn, worker_role, "select, insert, update, delete", tables)
        grant(conn, worker_role, "usage, select, update", sequences, on="sequence")

    def reset(self, conn) -> None:
        # The queue (declared at install) and the schema versions stay; the rest is one run's.
        keep = {f"{PREFIX}queues", f"{PREFIX}schema_version"}
        unlogged = {t for (t,) in conn.execute(Q.unlogged_tables)}
        tables = [t for (t,) in conn.execute(Q.tables) if t not in keep]
        # Hazard (PostgreSQL before 15.19, 17.11, 18.6): an UNLOGGED table's sequence rewritten on the
        # primary (RESTART IDENTITY gives it a new file and init fork) reaches the standby as WAL whose
        # replay (seq_redo) leaves the init fork unflushed; promoted, the node copies the on-disk zeros
        # into the sequence, and the next RESTART IDENTITY or nextval fails with "bad magic number in
        # sequence". So the unlogged tables are emptied without touching their sequences: chancy never
        # draws from them (chancy_leader's row is inserted with id 1), and a promoted node's corrupt
        # sequence, if any, is never read. tests/integration/test_unlogged_sequence.py shows both.
        # No foreign key joins chancy's tables (its migrations declare none): two statements empty all.
        _truncate(conn, [t for t in tables if t in unlogged], restart_identity=False)
        _truncate(conn, [t for t in tables if t not in unlogged], restart_identity=True)
        # The queue as this design's options configure it (executor, concurrency): a design with other
        # options may have declared it in the same database (Worker reads it from chancy_queues).
        with conn.cursor(row_factory=dict_row) as cur:
            polling = int(self.intervals(self.schedule)["queue polling interval"])
            _app("").sync_declare_ex(cur, _queue(self.options, polling), upsert=True)
            conn.execute(Q.drop_tenant_queues)
            # per-tenant-queue: every worker polls each queue on its own, up to its own concurrency
            jobs = self.schedule.jobs if self.schedule else ()
            for name in sorted({self._queue_of(j) for j in jobs} - {QUEUE}):
                _app("").sync_declare_ex(cur, _queue(self.options, polling, name), upsert=True)

    def _queue_of(self, job) -> str:
        return f"tenant_{job.tenant}" if self.per_tenant else QUEUE

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        app = _app("")  # never opened: sync_push_many_ex runs on the runner's cursor
        chancy_jobs = [Job(func=TASK, queue=self._queue_of(j), kwargs={"args": hosted.job_args(j)},
                           max_attempts=max_attempts) for j in jobs]
        with conn.cursor(row_factory=dict_row) as cur:
            refs = app.sync_push_many_ex(cur, chancy_jobs)
        hosted.record_ids(conn, [(j.id, ref.identifier) for j, ref in zip(jobs, refs, strict=True)])

    def run_worker(self, ctx) -> None:
        global _ctx
        if not self.ready(ctx):  # threaded (pool_first): the body runs here, on the harness's pool
            return
        _ctx = ctx
        exported = {}
        watching = threading.Event()
        if self.executor != "threaded":  # in chancy's pool children, which rebuild the context (spawned.py)
            exported = spawned.export(ctx)
            spawned.watch(ctx, watching)
        try:
            asyncio.run(self._run(ctx))
        finally:
            watching.set()
            spawned.unexport(exported)

    async def _run(self, ctx) -> None:
        global _stop
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        _stop = (loop, event)
        t = self.intervals(ctx.schedule)
        dsn = conninfo.make_conninfo(ctx.worker_dsn, application_name=f"{ctx.identity}/queue")
        plugins = [Leadership(poll_interval=t["leadership poll"], timeout=t["leadership timeout"]),
                   Recovery(poll_interval=t["recovery period"])]
        async with _app(dsn, plugins=plugins, log=_worker_log(self.options.get("log"), ctx.identity)) as app:
            worker = Worker(app, worker_id=ctx.system_id, heartbeat_poll_interval=t["heartbeat interval"],
                            heartbeat_timeout=t["heartbeat timeout"])
            await worker.start()
            stopper = asyncio.create_task(self._until_stop(ctx, event))
            shutdown = asyncio.create_task(worker.wait_for_shutdown())
            done, _ = await asyncio.wait({stopper, shutdown}, return_when=asyncio.FIRST_COMPLETED)
            if shutdown in done:
                stopper.cancel()
                shutdown.result()  # a task of chancy's that died: the worker's error
                return
            await worker.stop()

    async def _until_stop(self, ctx, event: asyncio.Event) -> None:
        budget = ctx.schedule.dequeues
        while not event.is_set():
            # Jobs run in chancy's children: the budget is counted from the log all processes share.
            if budget is not None and self.executor != "threaded" and spawned.started_here(ctx) >= budget:
                return
            try:
                await asyncio.wait_for(event.wait(), timeout=max(ctx.poll, 0.05))
            except TimeoutError:
                pass


