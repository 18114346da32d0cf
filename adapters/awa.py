"""awa (hardbyte/awa, PyPI ``awa-pg`` 0.6.9: a Rust core through PyO3) hosted under protocol v2.

What runs is awa's own code, configured as its README and ``docs/configuration.md`` do, never patched.
Lines cited are of the v0.6.5 tag of hardbyte/awa, the newest release tag the stored snapshot has
(0.6.9's Rust source is not in it; the installed 0.6.9's Python layer, ``awa/client.py``, matches).

- schema: awa's own migrate (``awa.Client(url).migrate()``), run in a child interpreter: awa's
  Tokio runtime, once started in a process, is dead in its forks (measured: a forked worker of a
  runner that had called ``Client.insert`` never ran its job), and the workers are forks of the
  runner. It leaves the canonical storage (``awa.storage_status()``: ``canonical``), ``awa.jobs``.
- enqueue: the statement awa's insert sends, ``awa.insert_job_compat`` (``awa-model/src/insert.rs:11``),
  on the runner's transaction (``adapters/awa.sql``, same reason), kind ``pgjc_job`` (``derive_kind``
  of :class:`PgjcJob`), priority 2 and ``max_attempts`` the schedule's.
- worker: ``AsyncClient(url)``, ``@client.task(PgjcJob, queue="pgjc")``, ``await client.start([...])``
  with one queue at ``QueueConfig``'s default concurrency, ``max_workers`` 50
  (``awa-worker/src/dispatcher.rs:153``); the task runs ``hosted.run_job`` through ``asyncio.to_thread``.
- retries: awa's own. A raise is ``retryable`` at ``now() + awa.backoff_duration(attempt, ...)``
  (``executor.rs:1237``), ``2^attempt`` s plus up to 25 % (``migrations/v007_backoff_interval_fix.sql``),
  fixed in SQL; ``failed`` once ``attempt >= max_attempts``. The claim adds 1 to ``attempt`` and
  ``run_lease`` (``awa-model/queries/claim.sql:31-32``, as the dispatcher's own claim does).
- recovery: the maintenance leader's ``rescue_stale_heartbeats`` (``maintenance.rs:1250``: ``running``
  with ``heartbeat_at`` older than ``heartbeat_staleness`` -> ``retryable``) and deadline rescue
  (``maintenance.rs:1346``: past ``deadline_at``). Neither reads ``max_attempts``: a rescued job is
  claimed again whatever its ``attempt`` (unlike the callback rescue, ``maintenance.rs:1440``).

Fencing: every claim draws a new ``run_lease`` (``claim.sql:32``); the completion matches it,
``jobs.run_lease = completed.run_lease`` with ``state = 'running'`` (``awa-worker/src/completion.rs:73``),
as do the failure/retry (``executor.rs:1243``, ``WHERE id = $1 AND state = 'running' AND run_lease = $5``)
and the heartbeat (``heartbeat.rs:131``). A finish from a rescued run touches no row (ADR 013).

Hazard, left as awa has it (measured on 0.6.9, owner role too, with the docs' 1 s / 4 s heartbeat):
``awa.jobs.heartbeat_at`` is never refreshed. The runtime resolves its storage at start
(``client.rs:1506``; canonical here: the jobs were queued before the first worker, so the fresh-install
switch to queue storage, ``client.rs:1344``, does not happen) and hands it to dispatch and maintenance,
but ``HeartbeatService::new`` gets the builder's own ``self.storage`` (``client.rs:1578-1580``), queue
storage by default (``client.rs:172-181``): every live job past ``heartbeat_staleness`` is rescued as
"heartbeat stale" and claimed again while it still runs. Its finish is then fenced off (above).

Timing (:data:`TIMING`): the schedule's lease is ``heartbeat_staleness`` (90 s), its poll awa's
``poll_interval`` (200 ms); the rest keep their ratios (``client.rs:196``, ``maintenance.rs:598-607``,
``dispatcher.rs:155``), sent as whole milliseconds (1 at least). The retry backoff is SQL's, not
scaled: a run with retries waits 2-2.5 s, then 4-5 s, real, whatever the time scale (the run's notes).

Statuses (``awa.jobs.state``): available, scheduled, retryable -> queued; running, waiting_external ->
running; completed -> done; failed, cancelled -> dead. ``attempts`` is awa's ``attempt`` (claims, a
rescued run's included); the body is told ``job.attempt``. Grants: USAGE on schema ``awa``, DML on its
tables, its sequences; never ownership, never BYPASSRLS.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from urllib.parse import quote, urlencode

import awa  # noqa: F401 -- the library at import: --design without it is a usage error
from psycopg import conninfo, sql
from psycopg.types.json import Jsonb

from ..core import sqlfile
from ..core.errors import UsageError
from ..workers import hosted
from ..workers.timing import FIXED, WAIT, Interval, Intervals

Q = sqlfile.load(__file__, "awa.sql", "insert_job", "reset", "pending", "final_states")

QUEUE = "pgjc"
KIND = "pgjc_job"  # awa.derive_kind(PgjcJob): the class name in snake case
MAX_WORKERS = 50  # QueueConfig::default().max_workers (dispatcher.rs:153)

STATUS = {"available": "queued", "scheduled": "queued", "retryable": "queued", "running": "running",
          "waiting_external": "running", "completed": "done", "failed": "dead", "cancelled": "dead"}


@dataclasses.dataclass
class PgjcJob:
    """The task's arguments (:func:`hosted.job_args`), as awa serialises a dataclass."""

    job: int
    tenant: int | None = None
    duration: float = 0.0
    fault: str | None = None
    point: str | None = None
    strikes: int | None = None


TIMING = Intervals("awa", anchors={"lease": "heartbeat staleness", "poll": "poll interval"}, intervals=(
    Interval("heartbeat staleness", 90.0, kind=WAIT, setting="start(heartbeat_staleness_ms=90000)"),
    Interval("heartbeat interval", 30.0, setting="start(heartbeat_interval_ms=30000)"),
    Interval("heartbeat rescue interval", 30.0, recovery=True, setting="start(heartbeat_rescue_interval_ms=30000)"),
    Interval("deadline", 300.0, kind=WAIT, setting="queue deadline_duration_ms=300000"),
    Interval("deadline rescue interval", 30.0, recovery=True, setting="start(deadline_rescue_interval_ms=30000)"),
    Interval("leader election interval", 10.0, recovery=True, setting="start(leader_election_interval_ms=10000)"),
    Interval("promote interval", 0.25, setting="start(promote_interval_ms=250)"),
    Interval("poll interval", 0.2, anchor="poll", setting="start(poll_interval_ms=200)"),
    # Not a start() keyword: the leader re-checks its lock every 30 s (maintenance.rs:605). Reported.
    Interval("leader check interval", 30.0, grid=FIXED, bound=None, setting="leader_check_interval 30 s, fixed"),
    # SQL, not a setting: the longest wait before the retry of a schedule at its default max_attempts 3
    # (attempt 2: 4-5 s). It stretches the run's stall limit; reported, never raising the time scale.
    Interval("retry backoff", 5.0, grid=FIXED, kind=WAIT, recovery=True, bound=None,
             setting="awa.backoff_duration(attempt): 2^attempt s + up to 25 %"),
))
MS = {"heartbeat staleness": "heartbeat_staleness_ms", "heartbeat interval": "heartbeat_interval_ms",
      "heartbeat rescue interval": "heartbeat_rescue_interval_ms",
      "deadline rescue interval": "deadline_rescue_interval_ms",
      "leader election interval": "leader_election_interval_ms", "promote interval": "promote_interval_ms",
      "poll interval": "poll_interval_ms"}


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def url(dsn: str, **extra: str) -> str:
    """A libpq DSN as the URL awa's ``AsyncClient`` takes (sqlx reads no key=value string)."""
    p = {**conninfo.conninfo_to_dict(dsn), **extra}
    user, password = quote(p.pop("user", ""), safe=""), quote(p.pop("password", "") or "", safe="")
    host, port, db = p.pop("host", "localhost"), p.pop("port", "5432"), quote(p.pop("dbname", ""), safe="")
    query = {k: v for k, v in p.items() if k in ("application_name", "options", "sslmode")}
    return f"postgresql://{user}:{password}@{host}:{port}/{db}" + (f"?{urlencode(query)}" if query else "")


class Awa(hosted.HostedDesign):
    name = "awa"
    library = "awa-pg"
    TIMING = TIMING
    # The _ms keywords carry whole milliseconds: the promote interval (250 ms to the 90 s staleness,
    # 1 : 360) reaches 1 ms at a lease of 0.36 s; below it the ratio would break (lease 1 article s).
    min_time_scale = 0.36
    OPTIONS = {"max_workers": f"the queue's max_workers (default {MAX_WORKERS}, QueueConfig's)"}

    def __init__(self, **options: str):
        super().__init__(**options)
        w = self.options.get("max_workers", str(MAX_WORKERS))
        if not (w.isdigit() and int(w) >= 1):
            raise UsageError(f"design awa: max_workers={w!r}; a whole number of at least 1")
        self.max_workers = int(w)

    # --- the runner's side (admin connection) ---------------------------------------------------
    def install(self, conn, *, worker_role: str) -> None:
        dsn = conninfo.make_conninfo(conn.info.dsn, password=conn.info.password)
        subprocess.run([sys.executable, "-c", "import sys, awa; awa.Client(sys.argv[1]).migrate()", url(dsn)],
                       check=True, stdin=subprocess.DEVNULL, timeout=120)
        role = sql.Identifier(worker_role)
        for statement in ("grant usage on schema awa to {}",
                          "grant select, insert, update, delete on all tables in schema awa to {}",
                          "grant usage, select, update on all sequences in schema awa to {}",
                          "grant execute on all functions in schema awa to {}"):
            conn.execute(sql.SQL(statement).format(role))

    def reset(self, conn) -> None:
        conn.execute(Q.reset)

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        pairs = []
        for j in jobs:
            (lib,) = conn.execute(Q.insert_job, {"kind": KIND, "queue": QUEUE, "args": Jsonb(hosted.job_args(j)),
                                                 "max_attempts": max_attempts}).fetchone()
            pairs.append((j.id, lib))
        hosted.record_ids(conn, pairs)

    def pending(self, conn) -> int:
        return conn.execute(Q.pending, {"queue": QUEUE}).fetchone()[0]

    def final_states(self, conn) -> list[dict]:
        staleness = self.intervals(self.schedule)["heartbeat staleness"] if hasattr(self, "schedule") else None
        out = []
        for job, tenant, state, attempt, error, expired in conn.execute(Q.final_states, {"staleness": staleness}):
            out.append({"id": job, "tenant_id": tenant, "status": STATUS.get(state, state or "absent"),
                        "attempts": attempt, "last_error": error, "lease_expired": expired})
        return out

    # --- the worker's side (forked worker process) ----------------------------------------------
    def run_worker(self, ctx) -> None:
        if not ctx.may_dequeue():
            return
        if ctx.pool is None:  # the supervisor opens it first (pool_first); run.py bench does not
            ctx.open_pool()
        asyncio.run(self._run(ctx))

    async def _run(self, ctx) -> None:
        t = self.intervals(ctx.schedule)
        client = awa.AsyncClient(url(ctx.worker_dsn, application_name=f"{ctx.identity}/queue"))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        @client.task(PgjcJob, kind=KIND, queue=QUEUE)
        async def handle(job):
            try:
                await asyncio.to_thread(hosted.run_job, ctx, dataclasses.asdict(job.args), attempt=job.attempt)
            finally:
                if not ctx.may_dequeue():  # the budget is spent: awa's own graceful shutdown
                    loop.call_soon_threadsafe(stop.set)

        queue = {"name": QUEUE, "max_workers": self.max_workers, "deadline_duration_ms": _ms(t["deadline"])}
        await client.start([queue], **{kw: _ms(t[name]) for name, kw in MS.items()})
        try:
            await stop.wait()
            await client.shutdown()
        finally:
            await client.close()
