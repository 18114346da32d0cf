"""What a design costs per job: ``run.py bench`` prints it.

:func:`per_job_ratio`: the harness against :func:`bare_loop` (the lease design's statements in one
process), wall clock and the client's CPU. :func:`design_cost`: without the supervisor -- one worker
runs the design's own loop in this process (no fork, no ``pg_stat_activity`` sampling,
no quiescence checks) over fault-free jobs of zero duration, so the database's transaction
counter sees the design's transactions and nothing else of ours:

* **per-job latency**: first ``started`` to last ``finished`` in the execution log, per job --
  for ``lease-outbox`` this includes delivering the effect and marking it delivered;
* **transactions per job**: ``pg_stat_database.xact_commit + xact_rollback`` of the run's database
  over the run, per job, read from a session in *another* database (``postgres``) so that reading
  it adds nothing; less the body pool's checks before lending (its empty statement is a transaction
  of its own, one per borrow, the same for every design: ``TenantMode.pool``), counted by the pool.
  Hazard: a backend reports its counts when it goes idle or exits, so the worker's connections are
  closed first and the counter is read until it stops moving
  (:data:`SETTLE_READS`). Autovacuum may add a few.
"""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...core import sqlfile
from ...core.db import one
from ...core.errors import HarnessError
from ...core.events import LogEvent
from ...core.execlog import parse_lines, path_for
from ...core.schedule import JobSpec, Schedule
from ...workers import load_design
from ...workers.body.context import WorkerContext
from ...workers.body.execution import Q as BODY
from ...workers.body.execution import WorkerSpec, inherited_tenant
from ...workers.builtin.lease import Q as LEASE
from ...workers.design import DesignHandle, DesignRun

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


@contextmanager
def in_process(runner, design: DesignHandle, sched: Schedule, worker_dsn: str,
               identity: str = "bench") -> Iterator[tuple[DesignRun, WorkerContext]]:
    """*design*'s run of *sched* prepared (the pool size stamped as the runner stamps it: the body's real
    pool), and a worker context for it in this process, in a run directory removed after: the caller
    runs ``run.run_worker(ctx)``; :func:`records` reads what it wrote before the block ends."""
    sched = sched.replace(pool_size=design.pool_size(sched))
    run = runner.prepare(sched, design)
    with tempfile.TemporaryDirectory(prefix="pgjc-cost-") as run_dir:
        ctx = WorkerContext(WorkerSpec(identity, sched, worker_dsn, Path(run_dir)))
        try:
            yield run, ctx
        finally:
            ctx.close()


def records(ctx: WorkerContext) -> list[dict]:
    """What the in-process worker of *ctx* wrote to its execution log."""
    return parse_lines(path_for(ctx.spec.run_dir, ctx.identity).read_bytes())[0]


def per_job(records: list[dict]) -> float:
    """Seconds per job in steady state: first ``started`` to last ``finished``, over the jobs but one."""
    starts = [r["t"] for r in records if r["event"] == LogEvent.STARTED]
    ends = [r["t"] for r in records if r["event"] == LogEvent.FINISHED]
    return (max(ends) - min(starts)) / max(1, len(starts) - 1)


def design_cost(runner, admin_dsn: str, worker_dsn: str, design_name: str, *, jobs: int,
                time_scale: float) -> dict:
    """Per job for *design_name* over *jobs* fault-free jobs: ``latency_ms`` (first start to last
    finish, per job), ``execution_ms`` (median start to finish) and ``transactions``."""
    sched = Schedule(jobs=tuple(JobSpec(i, tenant=(i % 100) + 1, duration=0.0) for i in range(1, jobs + 1)),
                     workers=1, design=design_name, time_scale=time_scale, dequeues=jobs)
    db = conninfo_to_dict(admin_dsn).get("dbname")
    if not isinstance(db, str):  # a provisioned database's DSN always names it
        raise HarnessError("design_cost: the admin DSN names no database")
    with in_process(runner, load_design(design_name), sched, worker_dsn) as (run, ctx), \
            psycopg.connect(make_conninfo(admin_dsn, dbname="postgres"), autocommit=True) as counter:
        before = _settled(counter, db)
        run.run_worker(ctx)
        # each borrow's check is one transaction of the pool's (an empty statement), not the design's
        checks = ctx.pool.get_stats().get("requests_num", 0) if ctx.pool is not None else 0
        ctx.close()  # Hazard (SETTLE_READS): the counter moves once the worker's sessions are closed
        after = _settled(counter, db)
        logged = records(ctx)
    starts = [r["t"] for r in logged if r["event"] == LogEvent.STARTED]
    ends = [r["t"] for r in logged if r["event"] == LogEvent.FINISHED]
    done = len(ends)
    return {"jobs": done, "latency_ms": (max(ends) - min(starts)) / max(1, done) * 1000,
            "execution_ms": statistics.median(e - s for s, e in zip(starts, ends, strict=False)) * 1000,
            "transactions": (after - before - checks) / max(1, done)}


def bare_loop(dsn: str, jobs: int, lease: float, **connect) -> float:
    """The lease design's statements for *jobs* jobs in one process: seconds per job."""
    with psycopg.connect(dsn, **connect) as conn:
        t0 = time.perf_counter()
        for _ in range(jobs):
            job_id, tenant, attempt, _payload = one(conn.execute(LEASE.claim, {"lease": lease}))
            conn.commit()
            conn.execute(inherited_tenant(f"bare {job_id} {attempt}")).fetchone()
            conn.execute(BODY.set_tenant, {"tenant": str(tenant), "local": True})
            run = one(conn.execute(BODY.insert_run, {"job": job_id, "worker": "bare", "attempt": attempt}))[0]
            conn.execute(BODY.read_invoices, {"tenant": tenant}).fetchone()
            conn.execute(LEASE.finish, {"id": job_id})
            conn.execute(BODY.finish_run, {"run": run})
            conn.commit()
        return (time.perf_counter() - t0) / jobs


def per_job_ratio(runner, database, sched: Schedule, out, pairs: int = 5) -> None:
    """The harness's fault-free run of *sched* (one worker) against :func:`bare_loop`, alternating
    *pairs* times: the median wall-clock ratio per job (the issue's figure: steady state, first start to
    last finish), and beside it the client's CPU per job -- the forked worker's (its start included,
    from the reaped children's rusage) against the bare loop's -- which the scheduler's placement of
    client and backend on 2 vCPUs does not move by +-20% as it does the wall clock."""
    jobs = len(sched.jobs)
    ratios = []
    cpu = []
    for _ in range(pairs):  # alternate, and take the median: this machine is noisy
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        h = runner.run(sched)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        harness_per_job = per_job(h.records)
        runner.prepare(sched)
        # Behind a pooler, the prepared statements of earlier clients are still on its server sessions
        unprepared = {"prepare_threshold": None} if database.pooler else {}
        p0 = time.process_time()
        bare = bare_loop(database.worker_dsn, jobs, sched.seconds(sched.timing.lease), **unprepared)
        bare_cpu = (time.process_time() - p0) / jobs
        worker_cpu = (c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime) / jobs
        ratios.append((harness_per_job / bare, harness_per_job, bare, (h.t1 - h.t0) / jobs))
        cpu.append((worker_cpu / bare_cpu, worker_cpu, bare_cpu))
    ratio, harness_per_job, bare, whole = sorted(ratios)[len(ratios) // 2]
    print(f"per fault-free job ({jobs} jobs, 1 worker, lease; median of {pairs} alternating pairs): harness "
          f"{harness_per_job * 1000:.3f} ms (whole run incl. fork and settle {whole * 1000:.3f} ms), "
          f"bare psycopg loop {bare * 1000:.3f} ms: {ratio:.2f}x (goal <= 1.10x; all: "
          f"{', '.join(f'{r[0]:.2f}x' for r in ratios)})", file=out)
    c_ratio, worker_cpu, bare_cpu = sorted(cpu)[len(cpu) // 2]
    print(f"  client CPU per job: the forked worker {worker_cpu * 1000:.3f} ms (its start included), "
          f"the bare loop {bare_cpu * 1000:.3f} ms: {c_ratio:.2f}x "
          f"(all: {', '.join(f'{r[0]:.2f}x' for r in cpu)})", file=out)
