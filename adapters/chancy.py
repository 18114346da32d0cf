"""chancy (TkTech/chancy, PyPI ``chancy``) hosted under protocol v2 (``workers/hosted/protocol.py``).

What runs is chancy's own code: its migrations (``Chancy.migrate``), its push
(``Chancy.sync_push_many_ex`` on the runner's transaction), its ``Worker`` (``fetch_jobs`` claims with
``FOR UPDATE SKIP LOCKED`` and sets ``state = 'running'``; completions are queued in memory and written
by ``Worker.flush`` once a second), its retry policy (``Executor.on_job_completed``: ``attempts + 1``,
``retrying`` until ``attempts + 1 >= max_attempts``, then ``failed``), its heartbeat
(``Worker.announce_worker`` into ``chancy_workers``) and its default ``Leadership`` and ``Recovery``
plugins (``Recovery.recover``: every ``running`` job whose ``taken_by`` worker was not seen within
``heartbeat_timeout`` goes back to ``pending`` with ``max_attempts + 1`` and its claim cleared).

Configuration: chancy's defaults unless a ``--design-option`` says otherwise (the table:
``docs/reference/adapters.md``): one queue, ``default``, with chancy's default **process executor**
(each job in a pool child it spawns, where :mod:`workers.hosted.spawned` rebuilds the body's context; the
strike signal, also chancy's cancel signal there, is blocked and taken only at a point) and default
concurrency (the core count); ``executor=threaded``, ``concurrency=N``, ``eager_polling=true``.
Intervals (:data:`TIMING`) keep the ratios of chancy's documented defaults, the lease as its 90 s
heartbeat timeout; the whole-second poll and the fixed 1 s flush are broken ratios the run reports.
The other default plugins (Pruner, Metrics, Workflow) stay.

Grants: chancy's worker calls ``Chancy.is_up_to_date`` at start, which runs ``CREATE TABLE IF NOT
EXISTS chancy_schema_version`` (``Migrator.upsert_version_table``): PostgreSQL checks CREATE on the
schema before it sees the table exists, so the worker role gets CREATE on schema ``public``
(never ownership of chancy's tables, never BYPASSRLS).

Status mapping (``final_states``): ``pending`` and ``retrying`` -> ``queued``; ``running`` ->
``running``; ``succeeded`` -> ``done``; ``failed`` -> ``dead``; anything else is passed through.
``attempts`` is chancy's ``attempts`` column as it is: chancy adds 1 when an execution *completes*
(succeeds or raises, ``Executor.on_job_completed``); an execution cut short by a crash or recovered
from a lost worker is not counted (``Recovery.recover`` leaves ``attempts`` alone and raises
``max_attempts`` instead). The attempt a task believes it runs is ``attempts + 1`` at claim (1-based),
so an execution that re-runs a recovered job logs the same attempt number as the one it replaces.
``lease_expired``: a ``running`` job whose ``taken_by`` worker has no ``chancy_workers`` row with
``expires_at >= now()`` -- exactly what ``Recovery.recover`` would take (``expires_at`` is
``last_seen + heartbeat_timeout``, ``Worker.announce_worker``); None for other states.
"""

import asyncio
import logging
import threading
from pathlib import Path

import chancy as chancy_lib
from chancy import Job, Queue, QueuedJob
from chancy.plugins.leadership import Leadership
from chancy.plugins.recovery import Recovery
from chancy.worker import Worker
from psycopg import conninfo, sql
from psycopg.rows import dict_row

from ..core.errors import UsageError
from ..workers import hosted
from ..workers.hosted import spawned, timing

QUEUE = "default"
PREFIX = "chancy_"
TASK = f"{__name__}.hosted_job"  # the importable name chancy's executor resolves (executors/base.py)

STATUS = {"pending": "queued", "retrying": "queued", "running": "running", "succeeded": "done",
          "failed": "dead"}

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


def _app(dsn: str, *, plugins=(), log=None):
    return chancy_lib.Chancy(dsn, plugins=list(plugins), prefix=PREFIX, log=log or logging.getLogger("chancy"))


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


# chancy's intervals as its code documents them (worker.py Worker, plugins/recovery.py, plugins/leadership.py,
# queue.py Queue): the schedule's lease is the heartbeat timeout (90 s); the rest keep their ratio to it.
TIMING = timing.Intervals("chancy", anchors={"lease": "heartbeat timeout"}, intervals=(
    timing.Interval("heartbeat timeout", 90.0, kind=timing.WAIT, setting="Worker(heartbeat_timeout=90)"),
    timing.Interval("heartbeat interval", 30.0, setting="Worker(heartbeat_poll_interval=30)"),
    timing.Interval("recovery period", 60.0, recovery=True, setting="Recovery(poll_interval=60)"),
    timing.Interval("leadership poll", 60.0, setting="Leadership(poll_interval=60)"),
    timing.Interval("leadership timeout", 120.0, kind=timing.WAIT, setting="Leadership(timeout=120)"),
    # An INTEGER column: 1 s is the least. It only delays a fetch (reported, never raising the scale).
    timing.Interval("queue polling interval", 5.0, grid=timing.WHOLE, bound=None, setting="Queue(polling_interval=5)"),
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


def _queue(options: dict, polling: int = 1) -> Queue:
    """chancy's ``Queue`` defaults (``queue.py``) unless an option says otherwise: its process
    executor, concurrency None (the core count, ``ProcessExecutor.get_default_concurrency``), no eager
    polling; *polling* whole seconds (an INTEGER column, :data:`TIMING`)."""
    concurrency = options.get("concurrency")
    return Queue(QUEUE, concurrency=int(concurrency) if concurrency else None,
                 executor=EXECUTORS[options.get("executor", "process")], polling_interval=polling,
                 eager_polling=options.get("eager_polling", "false") == "true")


TABLES = "select tablename from pg_tables where schemaname = 'public' and tablename like %s"
SEQUENCES = "select sequencename from pg_sequences where schemaname = 'public' and sequencename like %s"


def _names(conn, query: str) -> list[str]:
    """chancy's tables or sequences (core and plugins: every name starts with the prefix)."""
    return [name for (name,) in conn.execute(query, [PREFIX.replace("_", r"\_") + "%"])]


def _dsn_of(conn) -> str:
    """The DSN of an open connection, password included (``conn.info.dsn`` leaves it out)."""
    password = conn.pgconn.password
    extra = {"password": password.decode()} if password else {}
    return conninfo.make_conninfo(conn.info.dsn, **extra)


class Chancy(hosted.HostedDesign):
    name = "chancy"
    library = "chancy"
    # Threaded: a job that raised is written back up to 1 s later (the completion flush) and fetched
    # up to 1 s after that (the queue poll): 2 s with no new record, inside the supervisor's stall limit
    # (max_runtime + 4 leases = 9 article seconds) from time scale 0.25. Process: PROCESS_MIN_TIME_SCALE.
    TIMING = TIMING
    OPTIONS = {"log": "a directory to write chancy's own log into (INFO, one file per worker)",
               "executor": "process (chancy's default: each job in a spawned pool child) or threaded",
               "concurrency": "jobs at once per worker (default chancy's: the machine's core count)",
               "eager_polling": "true: fetch again as soon as a job completes (default false, chancy's)"}

    def __init__(self, **options: str):
        super().__init__(**options)
        self.executor = self.options.get("executor", "process")
        if self.executor not in EXECUTORS:
            raise UsageError(f"design chancy: executor={self.executor!r}; one of {', '.join(EXECUTORS)}")
        c = self.options.get("concurrency")
        if c is not None and not (c.isdigit() and int(c) >= 1):
            raise UsageError(f"design chancy: concurrency={c!r}; a whole number of at least 1")
        if self.options.get("eager_polling", "false") not in ("true", "false"):
            raise UsageError("design chancy: eager_polling is true or false")
        # The threaded executor runs the body here, on the harness's pool, opened before the loop;
        # the process executor's children open their own.
        self.pool_first = self.executor == "threaded"
        self.min_time_scale = 0.25 if self.executor == "threaded" else PROCESS_MIN_TIME_SCALE
        if self.executor == "threaded":
            self.TIMING = TIMING.without("process executor start")

    def install(self, conn, *, worker_role: str) -> None:
        async def migrate():
            async with _app(_dsn_of(conn)) as app:
                await app.migrate()
                await app.declare(_queue(self.options), upsert=True)

        asyncio.run(migrate())
        role = sql.Identifier(worker_role)
        # CREATE: Worker.start -> Chancy.is_up_to_date -> Migrator.upsert_version_table runs CREATE
        # TABLE IF NOT EXISTS, which PostgreSQL checks against the schema before it finds the table.
        conn.execute(sql.SQL("grant usage, create on schema public to {}").format(role))
        for table in _names(conn, TABLES):
            conn.execute(sql.SQL("grant select, insert, update, delete on {} to {}").format(
                sql.Identifier(table), role))
        for seq in _names(conn, SEQUENCES):
            conn.execute(sql.SQL("grant usage, select, update on sequence {} to {}").format(
                sql.Identifier(seq), role))

    def reset(self, conn) -> None:
        # The queue (declared at install) and the schema versions stay; the rest is one run's.
        keep = {f"{PREFIX}queues", f"{PREFIX}schema_version"}
        tables = [t for t in _names(conn, TABLES) if t not in keep]
        conn.execute(sql.SQL("truncate {} restart identity cascade").format(
            sql.SQL(", ").join(sql.Identifier(t) for t in tables)))
        # The queue as this design's options configure it (executor, concurrency): a design with other
        # options may have declared it in the same database (Worker reads it from chancy_queues).
        with conn.cursor(row_factory=dict_row) as cur:
            polling = int(self.intervals(self.schedule)["queue polling interval"])
            _app("").sync_declare_ex(cur, _queue(self.options, polling), upsert=True)

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        app = _app("")  # never opened: sync_push_many_ex runs on the runner's cursor
        chancy_jobs = [Job(func=TASK, queue=QUEUE, kwargs={"args": hosted.job_args(j)}, max_attempts=max_attempts)
                       for j in jobs]
        with conn.cursor(row_factory=dict_row) as cur:
            refs = app.sync_push_many_ex(cur, chancy_jobs)
        hosted.record_ids(conn, [(j.id, ref.identifier) for j, ref in zip(jobs, refs, strict=True)])

    def pending(self, conn) -> int:
        return conn.execute(
            f"select count(*) from {PREFIX}jobs where state in ('pending', 'retrying', 'running')").fetchone()[0]

    def final_states(self, conn) -> list[dict]:
        ids = hosted.schedule_ids(conn)
        rows = conn.execute(f"""
            select j.id::text, j.kwargs -> 'args' ->> 'tenant', j.state, j.attempts,
                   j.errors -> -1 ->> 'traceback',
                   case when j.state = 'running' then not exists (
                       select 1 from {PREFIX}workers w
                       where w.worker_id = j.taken_by and w.expires_at >= now()) end
            from {PREFIX}jobs j""").fetchall()
        out = []
        for lib_id, tenant, state, attempts, tb, expired in rows:
            if lib_id not in ids:
                continue
            last = None
            if tb:
                lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
                last = lines[-1] if lines else tb
            out.append({"id": ids[lib_id], "tenant_id": int(tenant) if tenant is not None else None,
                        "status": STATUS.get(state, state), "attempts": attempts, "last_error": last,
                        "lease_expired": expired})
        return sorted(out, key=lambda r: r["id"])

    def run_worker(self, ctx) -> None:
        global _ctx
        _ctx = ctx
        exported, watching = {}, threading.Event()
        if self.executor == "threaded":  # the body runs in this process, on the harness's pool
            if ctx.pool is None:  # the supervisor opens it first (pool_first); harness/bench/cost.py does not
                ctx.open_pool()
        else:  # in chancy's spawned pool children, which rebuild the context (workers/hosted/spawned.py)
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
            worker = Worker(app, worker_id=ctx.identity, heartbeat_poll_interval=t["heartbeat interval"],
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

    def accepted_finishes(self, conn) -> dict[int, dict]:
        from . import finishes  # chancy_jobs' last accepted completion per job (adapters/finishes.py)
        return finishes.chancy(conn)


