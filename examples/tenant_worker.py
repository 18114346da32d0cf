"""A user's own worker, tenant code and all, under test: ``--design examples/tenant_worker.py:TenantWorker``.

The first half is the worker as a backend engineer writes it: a psycopg_pool pool, a tenant
decorator that sets ``app.current_tenant`` for the job's reads (row-level security filters on
it), its own ``FOR UPDATE SKIP LOCKED`` claim that takes back a job whose worker died. The second
half hosts it (protocol v2, ``workers/hosted/protocol.py``): the job body runs on the connection the
decorator prepared (``run_job(..., conn=conn)``), so the harness judges this code's tenant
handling, not its own.

``--design-option scope=session`` is the common mistake: ``set_config(.., false)`` outlives the job
on the pooled connection, and the next job that sets no tenant (a system job) reads as the last
tenant. ``scope=local`` (the default) sets it for the job's transaction only.
"""

from __future__ import annotations

import functools
import time
from contextlib import contextmanager

from psycopg import sql
from psycopg_pool import ConnectionPool

from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.workers import hosted

# --- the worker, as its authors wrote it --------------------------------------------------------------
SCHEMA = """
create table if not exists tenant_jobs (
    id bigserial primary key, args jsonb not null, status text not null default 'queued',
    attempts int not null default 0, max_attempts int not null, last_error text, claimed_at timestamptz
)"""
CLAIM = """
update tenant_jobs set status = 'running', attempts = attempts + 1, claimed_at = now()
 where id = (select id from tenant_jobs
              where status = 'queued'
                 or (status = 'running' and claimed_at < now() - make_interval(secs => %(lease)s)
                     and attempts < max_attempts)
              order by id limit 1 for update skip locked)
returning id, args, attempts"""
SWEEP = """update tenant_jobs set status = 'failed', last_error = 'lease expired at max attempts'
 where status = 'running' and claimed_at < now() - make_interval(secs => %(lease)s)
   and attempts >= max_attempts"""
DONE = "update tenant_jobs set status = 'done' where id = %s"
FAILED = """update tenant_jobs set last_error = %s,
       status = case when attempts >= max_attempts then 'failed' else 'queued' end where id = %s"""


@contextmanager
def tenant_scope(conn, tenant_id, *, scope="local"):
    """Run the job as *tenant_id* (None: a system job, no tenant)."""
    if scope == "local":
        with conn.transaction():
            if tenant_id is not None:
                conn.execute("select set_config('app.current_tenant', %s, true)", [str(tenant_id)])
            yield conn
    else:  # the mistake: the setting stays on the pooled connection after the job commits
        if tenant_id is not None:
            conn.execute("select set_config('app.current_tenant', %s, false)", [str(tenant_id)])
        yield conn


def tenant_task(pool, scope):
    """Decorator: the task gets a pooled connection already set to the job's tenant."""
    def wrap(fn):
        @functools.wraps(fn)
        def task(args, attempt):
            with pool.connection() as conn, tenant_scope(conn, args.get("tenant"), scope=scope):
                return fn(conn, args, attempt)
        return task
    return wrap


def work_loop(queue, task, *, lease, poll, keep_going):
    """Claim, run, finish; sweep when idle."""
    while keep_going():
        row = queue.execute(CLAIM, {"lease": lease}).fetchone()
        if row is None:
            queue.execute(SWEEP, {"lease": lease})
            time.sleep(poll)
            continue
        job_id, args, attempts = row
        try:
            task(args, attempts)
        except Exception as exc:
            queue.execute(FAILED, [str(exc), job_id])
        else:
            queue.execute(DONE, [job_id])


# --- hosted by pg-job-chaos ----------------------------------------------------------------------------
class TenantWorker(hosted.HostedDesign):
    name = "tenant-worker"
    OPTIONS = {"scope": "local (default) | session: how the tenant decorator sets app.current_tenant"}
    tenant_setting = "app.current_tenant"  # what the decorator sets; the invoices' policy reads it
    pool_first = False  # the worker has a pool of its own

    def __init__(self, **options):
        super().__init__(**options)
        if self.options.get("scope", "local") not in ("local", "session"):
            raise UsageError(f"design tenant-worker: scope {self.options['scope']!r}: local or session")

    def install(self, conn, *, worker_role):
        conn.execute(SCHEMA)
        conn.execute(sql.SQL("grant select, update on tenant_jobs to {}").format(sql.Identifier(worker_role)))

    def reset(self, conn):
        conn.execute("truncate tenant_jobs restart identity")

    def enqueue(self, conn, jobs, *, max_attempts):
        for job in jobs:
            (my_id,) = conn.execute(
                "insert into tenant_jobs (args, max_attempts) values (%s, %s) returning id",
                [hosted.Jsonb(hosted.job_args(job)), max_attempts]).fetchone()
            hosted.record_ids(conn, [(job.id, my_id)])

    def pending(self, conn):  # queued, or running (taken back after a lease, or swept)
        return conn.execute(
            "select count(*) from tenant_jobs where status in ('queued', 'running')").fetchone()[0]

    def final_states(self, conn):
        ids = hosted.schedule_ids(conn)
        states = {"queued": "queued", "running": "running", "done": "done", "failed": "dead"}
        return [{"id": ids[str(i)], "tenant_id": args["tenant"], "status": states.get(status, status),
                 "attempts": attempts, "last_error": error, "lease_expired": None}
                for i, args, status, attempts, error in
                conn.execute("select id, args, status, attempts, last_error from tenant_jobs order by id")]

    def run_worker(self, ctx):
        import psycopg

        scope = self.options.get("scope", "local")
        with ConnectionPool(ctx.worker_dsn, min_size=1, max_size=1, open=True) as pool, \
                psycopg.connect(ctx.worker_dsn, autocommit=True) as queue:

            @tenant_task(pool, scope)
            def run(conn, args, attempt):
                hosted.run_job(ctx, args, attempt=attempt, conn=conn)

            work_loop(queue, run, lease=ctx.lease, poll=ctx.poll, keep_going=ctx.may_dequeue)
