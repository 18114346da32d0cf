"""chancy (TkTech/chancy, PyPI ``chancy``) hosted under protocol v2 (``workers/hosted.py``).

What runs is chancy's own code: its migrations (``Chancy.migrate``), its push
(``Chancy.sync_push_many_ex`` on the runner's transaction), its ``Worker`` (``fetch_jobs`` claims with
``FOR UPDATE SKIP LOCKED`` and sets ``state = 'running'``; completions are queued in memory and written
by ``Worker.flush`` once a second), its retry policy (``Executor.on_job_completed``: ``attempts + 1``,
``retrying`` until ``attempts + 1 >= max_attempts``, then ``failed``), its heartbeat
(``Worker.announce_worker`` into ``chancy_workers``) and its default ``Leadership`` and ``Recovery``
plugins (``Recovery.recover``: every ``running`` job whose ``taken_by`` worker was not seen within
``heartbeat_timeout`` goes back to ``pending`` with ``max_attempts + 1`` and its claim cleared).

Configuration (derived from the schedule, real seconds; logic as chancy's docs configure it):

- one queue, ``default`` (the queue ``Worker.start`` would declare anyway), ``concurrency=1`` and the
  **threaded** executor (``Chancy.Executor.Threaded``): chancy's default process executor installs a
  SIGUSR1 handler in its children (``executors/process.py``), and SIGUSR1 is the harness's strike
  signal. ``eager_polling=True`` (the docs' advice for low-concurrency queues), ``polling_interval=1``
  (an INTEGER column: whole seconds, 1 is the smallest that is not a busy loop).
- ``Worker(heartbeat_poll_interval=ctx.heartbeat, heartbeat_timeout=ctx.lease)``: a worker not seen
  for one lease is lost, as the lease designs' leases expire.
- ``Recovery(poll_interval=ctx.poll)``: the sweep runs as often as the lease designs' sweep.
- ``Leadership(poll_interval=ctx.heartbeat, timeout=ctx.lease)``: recovery runs on the leader only;
  chancy requires ``timeout >= poll_interval`` (its docs: "typically at least twice").
- the other default plugins (Pruner, Metrics, Workflow) stay, as chancy enables them by default.

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
from pathlib import Path

import chancy as chancy_lib
from chancy import Job, Queue, QueuedJob
from chancy.plugins.leadership import Leadership
from chancy.plugins.recovery import Recovery
from chancy.worker import Worker
from psycopg import conninfo, sql
from psycopg.rows import dict_row

from ..workers import hosted

QUEUE = "default"
PREFIX = "chancy_"
TASK = f"{__name__}.hosted_job"  # the importable name chancy's executor resolves (executors/base.py)

STATUS = {"pending": "queued", "retrying": "queued", "running": "running", "succeeded": "done",
          "failed": "dead"}

# The forked worker's context and stop request, set by run_worker (one worker per process).
_ctx = None
_stop: "tuple[asyncio.AbstractEventLoop, asyncio.Event] | None" = None


def hosted_job(args: dict, *, context: QueuedJob) -> None:
    """The chancy task: runs the harness's body in chancy's executor thread. ``context`` is injected
    by chancy (a keyword-only parameter annotated QueuedJob, ``Executor.get_function_and_kwargs``)."""
    ctx = _ctx
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


def _queue() -> Queue:
    return Queue(QUEUE, concurrency=1, executor=chancy_lib.Chancy.Executor.Threaded, polling_interval=1,
                 eager_polling=True)


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
    # chancy counts two intervals in whole seconds that no time scale shrinks: a queue polls at most
    # once a second (Queue.polling_interval is an INTEGER column; 1 is the least that is not a busy
    # loop) and a worker writes finished and failed jobs once a second (Worker.send_outgoing_interval
    # = 1, not a parameter). A job that raised is therefore written back as ``retrying`` up to 1 s
    # later and fetched again up to 1 s after that: up to 2 s with no new record in the execution log.
    # The supervisor calls a run stalled after max_runtime + 4 leases (9 article seconds, without the
    # jobs' own durations) with no new record, so the scale must make 9 article seconds exceed 2 s.
    # The other intervals (heartbeat, heartbeat timeout, leadership, recovery) are float seconds in
    # chancy's code (asyncio sleeps, timedeltas, SQL interval literals), though annotated ``int``.
    min_time_scale = 0.25
    OPTIONS = {"log": "a directory to write chancy's own log into (INFO, one file per worker)"}

    def install(self, conn, *, worker_role: str) -> None:
        async def migrate():
            async with _app(_dsn_of(conn)) as app:
                await app.migrate()
                await app.declare(_queue(), upsert=True)

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
        if ctx.pool is None:  # the supervisor opens it first (HostedDesign.pool_first); harness/bench/cost.py does not
            ctx.open_pool()
        asyncio.run(self._run(ctx))

    async def _run(self, ctx) -> None:
        global _stop
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        _stop = (loop, event)
        dsn = conninfo.make_conninfo(ctx.worker_dsn, application_name=f"{ctx.identity}/queue")
        plugins = [Leadership(poll_interval=ctx.heartbeat, timeout=ctx.lease), Recovery(poll_interval=ctx.poll)]
        async with _app(dsn, plugins=plugins, log=_worker_log(self.options.get("log"), ctx.identity)) as app:
            worker = Worker(app, worker_id=ctx.identity, heartbeat_poll_interval=ctx.heartbeat,
                            heartbeat_timeout=ctx.lease)
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
        requested = getattr(self, "stop_requested", None)
        while not event.is_set():
            if requested is not None and requested(ctx):
                return
            try:
                await asyncio.wait_for(event.wait(), timeout=max(ctx.poll, 0.05))
            except TimeoutError:
                pass


