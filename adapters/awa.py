"""awa (hardbyte/awa, PyPI ``awa-pg`` 0.6.9: a Rust core through PyO3) hosted under protocol v2.

awa's own code, configured as its README, ``docs/getting-started-python.md`` and
``docs/configuration.md`` do, never patched. Lines cited are of hardbyte/awa v0.6.5 (PyPI has no 0.6.9
sdist; the statements are unchanged on main at 0.7.0-alpha.1, and 0.6.9 behaves as they say,
measured). Hazard: awa's Tokio runtime, once started in a process, is dead in its forks, and the
workers are forks of the runner: every awa call of the runner's side runs in a child interpreter
(:func:`_child`). The documented sequence is kept:

- schema: ``Client.migrate()``, then one ``AsyncClient.start()`` / ``shutdown()`` with nothing queued:
  a fresh install's first runtime switches it to queue storage, awa 0.6's default
  (``client.rs:1334-1367``, ``storage_auto_finalize_if_fresh``), as a quick start does.
- enqueue: ``Client.insert(PgjcJob(...), kind=, queue=, max_attempts=)``, priority 2, into a queue of
  the run's own (``pgjc_<hex>``): nothing a previous run left is claimed, no ring is emptied behind
  awa's back.
- worker: ``AsyncClient``, ``@client.task``, ``start([...])``, one queue at ``QueueConfig``'s default
  ``max_workers`` 50 (``dispatcher.rs:156``); the task runs the body in ``asyncio.to_thread``.
- retries: awa's. A raise is ``retryable`` at ``now() + 2^attempt s`` (+ up to 25 %, SQL, not scaled),
  ``failed`` once ``attempt >= max_attempts`` (``queue_storage.rs:12877``). The heartbeat and deadline
  rescues (``queue_storage.rs:12922``, ``13072``) make a job ``retryable`` whatever its attempt
  (docs/findings/libraries/awa-rescue-max-attempts.md).
- fencing: each claim draws a new ``run_lease``; completion, failure and rescue take the attempt by
  ``(job_id, run_lease)`` (architecture.md: "stale completions, retries ... lose after rescue").

``--design-option storage=canonical`` queues the jobs before any worker started, on a database set
back to a fresh install's state by awa's own test helper (``awa/testing.py``, ``clean``): the runtime
cannot auto-finalize and runs canonical storage, whose heartbeats go to the builder's queue storage
(``client.rs:1578-1580``): docs/findings/libraries/awa-canonical-heartbeat.md.

``--design-option fairness=per-tenant-partition`` (issue 38; default ``off``): awa's ``PartitionedQueue``
("Deterministic physical queue partitions for one hot logical queue", ``_awa.pyi``) over the run's queue,
a job routed by ``queue_for_index(tenant mod partitions)`` (``route_by_key`` hashes tenants 1 and 98 to one
partition at 4, 8 and 16), the handler and ``max_workers`` on every partition. Tenants that share a
partition share its order.

Hazards, measured: queue storage keeps completed history only until queue-ring prune reclaims its
segment (configuration.md, "Retention and cleanup"): at the default 1000 ms rotation a completed job
left ``awa.jobs`` 2 s after it ran. The queue ring rotates hourly here (``queue_rotate_ms=1000``:
awa's); the claim ring keeps its 1000 ms, the lease ring its 250 ms; none decides when a job is
rescued. A job no longer in awa's tables is left out of its accepted finishes (unknown, not held).
``awa.jobs`` hides a job running on a receipt claim (``lease_claims``): ``awa.sql`` reads those too.

``attempts``: awa's ``attempt`` (claims, rescued ones included). Grants: USAGE and CREATE on schema
``awa`` (a retry makes its lane's sequences), DML and TRUNCATE (prune) on its tables, sequences,
functions, also those made later; never ownership, never BYPASSRLS.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import signal
import subprocess
import sys

import awa  # noqa: F401 -- the library at import: --design without it is a usage error
from psycopg import conninfo, sql

from ..core import procs, sqlfile
from ..workers import hosted
from ..workers.hosted import contract
from ..workers.hosted.declared import DeclaredDesign, admin_dsn, grant
from ..workers.hosted.protocol import body_threads
from ..workers.hosted.timing import FIXED, WAIT, Interval, Intervals
from . import finishes

Q = sqlfile.load(__file__, "awa.sql", "storage_state", "reset_canonical", "back_to_canonical", "pending",
                 "final_states", "accepted_finishes")
URL_KEYS = ("user", "password", "host", "port", "dbname", "application_name", "options", "sslmode")
KIND = "pgjc_job"  # awa.derive_kind(PgjcJob): the class name in snake case
MAX_WORKERS = 50  # QueueConfig::default().max_workers (dispatcher.rs:156)
STORAGES = ("queue", "canonical")
QUEUE_ROTATE_MS = 3_600_000  # an hour: no queue-ring prune inside a run (module docstring)
CLAIM_ROTATE_MS = 1000  # configuration.md's default, which start() derives from the queue ring's
_ROLES: dict[str, str] = {}  # database -> the worker role install() was given (reset() grants again)


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
    Interval("heartbeat rescue interval", 30.0, recovery=True,
             setting="start(heartbeat_rescue_interval_ms=30000)"),
    Interval("deadline", 300.0, kind=WAIT, setting="queue deadline_duration_ms=300000"),
    Interval("deadline rescue interval", 30.0, recovery=True,
             setting="start(deadline_rescue_interval_ms=30000)"),
    Interval("leader election interval", 10.0, recovery=True,
             setting="start(leader_election_interval_ms=10000)"),
    Interval("promote interval", 0.25, setting="start(promote_interval_ms=250)"),
    Interval("poll interval", 0.2, anchor="poll", setting="start(poll_interval_ms=200)"),
    # Not a start() keyword: the leader re-checks its lock every 30 s (maintenance.rs:605). Reported.
    Interval("leader check interval", 30.0, grid=FIXED, bound=None,
             setting="leader_check_interval 30 s, fixed"),
    # SQL, not a setting: the wait before a schedule's last claim at its default max_attempts 3, a
    # rescue's after attempt 3 included (8-10 s: rescues ignore max_attempts). Stretches the stall limit.
    Interval("retry backoff", 10.0, grid=FIXED, kind=WAIT, recovery=True, bound=None,
             setting="awa.backoff_duration(attempt): 2^attempt s + up to 25 %"),
))


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def url(dsn: str, **extra: str) -> str:
    """A libpq DSN as the URL awa's clients take (sqlx reads no key=value string; the keys it knows)."""
    p = {k: v for k, v in {**conninfo.conninfo_to_dict(dsn), **extra}.items() if k in URL_KEYS}
    return contract.url(conninfo.make_conninfo("", **p))


def _in_child(request: dict) -> dict:
    """Run *request* through awa in a child interpreter (:func:`_child`); its JSON answer."""
    parent = os.getpid()  # the child dies with this process (a SIGKILLed supervisor leaves no awa child)
    out = subprocess.run([sys.executable, "-c", "from pg_job_chaos.adapters import awa; awa._child()"],
                         input=json.dumps(request), capture_output=True, text=True, timeout=120,
                         preexec_fn=lambda: procs.die_with_parent(signal.SIGKILL, parent))
    if out.returncode != 0:
        raise RuntimeError(f"awa child ({request['do']}) exited {out.returncode}: "
                           f"{out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _child() -> None:
    """The child interpreter's side: one awa call, as its docs make it; the answer on stdout."""
    req = json.loads(sys.stdin.read())
    if req["do"] == "migrate":
        awa.Client(req["url"]).migrate()
        print(json.dumps({}))
    elif req["do"] == "first-start":  # a worker's first start, nothing queued: awa's fresh-install switch
        async def first_start():
            client = awa.AsyncClient(req["url"])
            client.task(PgjcJob, kind=KIND, queue="pgjc")(_noop)
            await client.start([{"name": "pgjc", "max_workers": 1}])
            await client.shutdown()
            await client.close()
        asyncio.run(first_start())
        print(json.dumps({}))
    elif req["do"] == "insert":
        client = awa.Client(req["url"])
        queues = req.get("queues") or [req["queue"]] * len(req["jobs"])
        ids = [client.insert(PgjcJob(**args), kind=KIND, queue=queue, max_attempts=req["max_attempts"]).id
               for args, queue in zip(req["jobs"], queues, strict=True)]
        client.close()
        print(json.dumps({"ids": ids}))


async def _noop(job) -> None:  # the first start's task: it never runs (nothing is queued)
    return None


class Awa(DeclaredDesign):
    name = "awa"
    library = "awa-pg"
    # sqlx takes one host: a multi-host DSN is "invalid port number" (issue 37); the replica endpoint
    one_host = True
    STATUS = {"available": "queued", "scheduled": "queued", "retryable": "queued", "running": "running",
              "waiting_external": "running", "completed": "done", "failed": "dead", "cancelled": "dead"}
    SQL = Q
    FINISHES = staticmethod(finishes.awa)  # awa.jobs' errors and completion, per job
    TIMING = TIMING
    # The _ms keywords carry whole milliseconds: the promote interval (250 ms to the 90 s staleness,
    # 1 : 360) reaches 1 ms at a lease of 0.36 s; below it the ratio would break (lease 1 article s).
    min_time_scale = 0.36
    OPTIONS = {"max_workers": f"the queue's max_workers (default {MAX_WORKERS}, QueueConfig's)",
               "queue_rotate_ms": f"start(queue_storage_queue_rotate_interval_ms=) (default "
                                  f"{QUEUE_ROTATE_MS}: terminal history readable for the run; awa's own "
                                  "1000 prunes it within seconds)",
               "storage": "queue (default: awa 0.6's, a worker started before the first insert) or "
                          "canonical (the jobs queued before any worker started: awa stays in canonical "
                          "storage)",
               "fairness": "off (default): one queue; per-tenant-partition: awa's PartitionedQueue, a job "
                           "routed by queue_for_index(tenant mod partitions), max_workers per partition",
               "partitions": "the PartitionedQueue's partitions (default 8)"}

    def __init__(self, **options: str):
        super().__init__(**options)
        self.max_workers = self.whole("max_workers", MAX_WORKERS)
        self.concurrency = self.max_workers  # the queue's max_workers: 50, QueueConfig's (dispatcher.rs:156)
        self.rotate_ms = self.whole("queue_rotate_ms", QUEUE_ROTATE_MS)
        self.storage = self.choice("storage", STORAGES)
        self.queue = "pgjc"
        self.partitioned = self.choice("fairness", ("off", "per-tenant-partition")) != "off"
        self.partitions = self.whole("partitions", 8)

    def queues(self) -> list[str]:
        """The run's physical queues: its own, or its PartitionedQueue's (``p0`` is the logical name)."""
        return awa.PartitionedQueue(self.queue, self.partitions).physical_queues if self.partitioned \
            else [self.queue]

    def queue_of(self, tenant) -> str:
        return self.queues()[int(tenant or 0) % self.partitions] if self.partitioned else self.queue

    # --- the runner's side (admin connection) ---------------------------------------------------
    def install(self, conn, *, worker_role: str) -> None:
        _ROLES[conn.info.dbname] = worker_role  # a design object of the other storage may reset here
        _in_child({"do": "migrate", "url": url(admin_dsn(conn))})
        # queue storage's tables, in both storages
        _in_child({"do": "first-start", "url": url(admin_dsn(conn))})
        self._grant(conn)

    def _grant(self, conn) -> None:
        role = _ROLES[conn.info.dbname]
        # Hazards (awa fails them unseen): an insert makes its lane's sequences (queue_claim_seq_*),
        # granted by default; a retry re-enqueues through ensure_lane (queue_storage.rs:3298), whose
        # ensure_lane_sequences runs CREATE SEQUENCE IF NOT EXISTS: without CREATE no retry is promoted.
        for what, objects in (("select, insert, update, delete, truncate", "tables"),
                              ("execute", "functions"), ("usage, select, update", "sequences")):
            grant(conn, role, what, ["awa"], on=f"all {objects} in schema")
            conn.execute(sql.SQL(f"alter default privileges in schema awa grant {what} on {objects} "
                                 "to {}").format(sql.Identifier(role)))
        grant(conn, role, "usage, create", ["awa"], on="schema")

    def for_run(self, schedule):
        run = super().for_run(schedule)
        run.queue = f"pgjc_{secrets.token_hex(4)}"  # this run's own queue (module docstring)
        return run

    def reset(self, conn) -> None:
        state = tuple(conn.execute(Q.storage_state).fetchone())
        if self.storage == "canonical":
            conn.execute(Q.reset_canonical)
            conn.execute(Q.back_to_canonical)
        elif state != ("active", "queue_storage"):
            # A fresh install, or a canonical run's database: its first worker's start switches it.
            conn.execute(Q.reset_canonical)  # the admin connection is in autocommit: nothing held open
            _in_child({"do": "first-start", "url": url(admin_dsn(conn))})
            if tuple(conn.execute(Q.storage_state).fetchone()) != ("active", "queue_storage"):
                raise RuntimeError("awa's first start left the database out of queue storage")
            self._grant(conn)  # the queue-storage tables its first start made

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        jobs = list(jobs)  # awa's own insert, one job at a time (docs' quick start), in a child
        answer = _in_child({"do": "insert", "url": url(admin_dsn(conn)), "queue": self.queue,
                            "queues": [self.queue_of(j.tenant) for j in jobs],
                            "max_attempts": max_attempts, "jobs": [hosted.job_args(j) for j in jobs]})
        hosted.record_ids(conn, [(j.id, lib) for j, lib in zip(jobs, answer["ids"], strict=True)])

    def sql_params(self) -> dict:
        clock = "worker" if self.storage == "queue" else "database"  # finalized_at: Utc::now() / now()
        return {"queue": self.queue, "queues": self.queues(), "clock": clock,
                "staleness": self.intervals(self.schedule).get("heartbeat staleness")}

    # --- the worker's side (forked worker process) ----------------------------------------------
    def run_worker(self, ctx) -> None:
        if self.ready(ctx):
            asyncio.run(self._run(ctx))

    async def _run(self, ctx) -> None:
        body_threads(ctx)  # asyncio.to_thread's default threads would bound the bodies, not awa
        t = self.intervals(ctx.schedule)
        client = awa.AsyncClient(url(ctx.worker_dsn, application_name=f"{ctx.identity}/queue"))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        async def handle(job):
            try:
                args = dataclasses.asdict(job.args)
                await asyncio.to_thread(hosted.run_job, ctx, args, attempt=job.attempt)
            finally:
                if not ctx.may_dequeue():  # the budget is spent: awa's own graceful shutdown
                    loop.call_soon_threadsafe(stop.set)

        # a deploy's SIGTERM: the same graceful shutdown (awa's Python client installs no signal handler)
        ctx.when_terminated(lambda: loop.call_soon_threadsafe(stop.set))
        for name in self.queues():  # per-tenant-partition: the handler on every partition, each its own
            client.task(PgjcJob, kind=KIND, queue=name)(handle)
        queues = [{"name": name, "max_workers": self.max_workers, "deadline_duration_ms": _ms(t["deadline"])}
                  for name in self.queues()]
        # The queue ring's rotation decides how long terminal history stays readable (module docstring);
        # the claim ring keeps its own documented 1000 ms (it follows the queue ring's unless set).
        # TIMING's intervals whose setting is start(keyword=default), each by that keyword.
        await client.start(queues, heartbeat_staleness_ms=_ms(t["heartbeat staleness"]),
                           heartbeat_interval_ms=_ms(t["heartbeat interval"]),
                           heartbeat_rescue_interval_ms=_ms(t["heartbeat rescue interval"]),
                           deadline_rescue_interval_ms=_ms(t["deadline rescue interval"]),
                           leader_election_interval_ms=_ms(t["leader election interval"]),
                           promote_interval_ms=_ms(t["promote interval"]),
                           poll_interval_ms=_ms(t["poll interval"]),
                           queue_storage_queue_rotate_interval_ms=self.rotate_ms,
                           queue_storage_claim_rotate_interval_ms=CLAIM_ROTATE_MS)
        try:
            await stop.wait()
            await client.shutdown()
        finally:
            await client.close()
