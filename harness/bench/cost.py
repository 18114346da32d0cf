"""What a design costs per job, measured without the supervisor: ``run.py bench`` prints it.

One worker runs the design's own loop in this process (no fork, no ``pg_stat_activity`` sampling,
no quiescence checks) over fault-free jobs of zero duration, so the database's transaction
counter sees the design's transactions and nothing else of ours:

* **per-job latency**: first ``started`` to last ``finished`` in the execution log, per job --
  for ``lease-outbox`` this includes delivering the effect and marking it delivered;
* **transactions per job**: ``pg_stat_database.xact_commit + xact_rollback`` of the run's database
  over the run, per job, read from a session in *another* database (``postgres``) so that reading
  it adds nothing. Hazard: a backend reports its counts when it goes idle or exits, so the
  worker's connections are closed first and the counter is read until it stops moving
  (:data:`SETTLE_READS`). Autovacuum may add a few.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...core import sqlfile
from ...core.db import one
from ...core.errors import HarnessError
from ...core.events import LogEvent
from ...core.execlog import path_for
from ...core.schedule import JobSpec, Schedule
from ...workers import load_design
from ...workers.body import WorkerSpec
from ...workers.context import WorkerContext

SETTLE_READS = 5  # reads of the counter, SETTLE_PAUSE apart, until two agree
SETTLE_PAUSE = 0.6  # seconds: PostgreSQL flushes a backend's statistics at most once a second
Q = sqlfile.load(__file__, "cost.sql", "clear_snapshot", "transactions")


def _xacts(conn: psycopg.Connection, db: str) -> int:
    conn.execute(Q.clear_snapshot)
    return one(conn.execute(Q.transactions, {"db": db}))[0]


def _settled(conn: psycopg.Connection, db: str) -> int:
    last = _xacts(conn, db)
    for _ in range(SETTLE_READS):
        time.sleep(SETTLE_PAUSE)
        now = _xacts(conn, db)
        if now == last:
            return now
        last = now
    return last


def design_cost(runner, admin_dsn: str, worker_dsn: str, design_name: str, *, jobs: int,
                time_scale: float) -> dict:
    """Per job for *design_name* over *jobs* fault-free jobs: ``latency_ms`` (first start to last
    finish, per job), ``execution_ms`` (median start to finish) and ``transactions``."""
    design = load_design(design_name)
    sched = Schedule(jobs=tuple(JobSpec(i, tenant=(i % 100) + 1, duration=0.0) for i in range(1, jobs + 1)),
                     workers=1, design=design_name, time_scale=time_scale, dequeues=jobs)
    sched = sched.replace(pool_size=design.pool_size(sched))  # as the runner stamps it: the body's real pool
    run = runner.prepare(sched, design)
    with tempfile.TemporaryDirectory(prefix="pgjc-cost-") as run_dir:
        ctx = WorkerContext(WorkerSpec("bench", sched, worker_dsn, Path(run_dir)))
        db = conninfo_to_dict(admin_dsn).get("dbname")
        if not isinstance(db, str):  # a provisioned database's DSN always names it
            raise HarnessError("design_cost: the admin DSN names no database")
        with psycopg.connect(make_conninfo(admin_dsn, dbname="postgres"), autocommit=True) as counter:
            before = _settled(counter, db)
            try:
                run.run_worker(ctx)
            finally:
                ctx.close()
            after = _settled(counter, db)
        records = [json.loads(x) for x in path_for(Path(run_dir), "bench").read_text().splitlines()]
    starts = [r["t"] for r in records if r["event"] == LogEvent.STARTED]
    ends = [r["t"] for r in records if r["event"] == LogEvent.FINISHED]
    done = len(ends)
    return {"jobs": done, "latency_ms": (max(ends) - min(starts)) / max(1, done) * 1000,
            "execution_ms": statistics.median(e - s for s, e in zip(starts, ends, strict=False)) * 1000,
            "transactions": (after - before) / max(1, done)}
