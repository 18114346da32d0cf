"""A user's worker whose own statements read its own RLS table, hosted with
``--design examples/tenant_pool_worker.py:PoolWorker``.

The first half is the worker as a backend engineer writes it: its queue table ``jobs``, a
psycopg_pool pool of **two** connections, a ``with tenant(conn, id)`` helper, and the job's code,
which reads the application's own ``documents`` table under forced row-level security. The second
half hosts it (protocol v2, ``workers/hosted/protocol.py``): the job body runs on the connection the
helper prepared (``run_job(..., conn=conn)``) and the job's code is passed as ``work=``, so that its
statements are the job's: ``tenant-isolation`` judges each of them by the tenant setting in force
when it ran (``workers/body/statements.py``), though the harness knows nothing of ``documents``.

``--design-option scope=session`` (the default here, the common mistake): ``set_config(.., false)``
outlives the job on the pooled connection, and a later system job that lands on that connection --
with a pool of two, the job after next -- runs ``select count(*) from documents`` as the last
tenant. ``scope=local``: ``set_config(.., true)`` in the job's transaction, which ends with it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from psycopg import sql
from psycopg_pool import ConnectionPool

from pg_job_chaos.workers import hosted

# --- the worker, as its authors wrote it --------------------------------------------------------------
SETTING = "app.current_tenant"  # what the helper sets and the documents' policy reads
SCHEMA = """
create table if not exists jobs (
    id bigserial primary key, args jsonb not null, status text not null default 'queued',
    attempts int not null default 0, max_attempts int not null, last_error text
);
create table if not exists documents (id bigserial primary key, tenant_id int not null, title text not null);
alter table documents enable row level security;
alter table documents force row level security;
drop policy if exists documents_tenant on documents;
create policy documents_tenant on documents
    using (tenant_id = nullif(current_setting('app.current_tenant', true), '')::int);
insert into documents (tenant_id, title)
select t, 'document ' || n from generate_series(1, 5) t, generate_series(1, t) n
 where not exists (select 1 from documents)"""
CLAIM = """
update jobs set status = 'running', attempts = attempts + 1
 where id = (select id from jobs where status = 'queued' order by id limit 1 for update skip locked)
returning id, args, attempts"""
DONE = "update jobs set status = 'done' where id = %s"
FAILED = """update jobs set last_error = %s,
       status = case when attempts >= max_attempts then 'failed' else 'queued' end where id = %s"""


@contextmanager
def tenant(conn, tenant_id, *, scope="session"):
    """Run as *tenant_id* on *conn* (None: a system job, no tenant)."""
    if scope == "local":
        with conn.transaction():
            if tenant_id is not None:
                conn.execute("select set_config('app.current_tenant', %s, true)", [str(tenant_id)])
            yield conn
    else:  # the mistake: the setting stays on the pooled connection after the job commits
        if tenant_id is not None:
            conn.execute("select set_config('app.current_tenant', %s, false)", [str(tenant_id)])
        yield conn


def count_documents(conn) -> int:
    """The job's own code: what it can see of the application's documents."""
    return conn.execute("select count(*) from documents").fetchone()[0]


# --- hosted by pg-job-chaos ----------------------------------------------------------------------------
class PoolWorker(hosted.HostedDesign):
    name = "tenant-pool-worker"
    OPTIONS = {"scope": "session (default) | local: how the tenant helper sets app.current_tenant"}
    tenant_setting = SETTING  # the invoices' policy reads it too, in this design's runs
    pool_first = False  # the worker has a pool of its own

    def __init__(self, **options):
        super().__init__(**options)
        self.scope = self.choice("scope", ("session", "local"))

    def install(self, conn, *, worker_role):
        conn.execute(SCHEMA)
        role = sql.Identifier(worker_role)
        conn.execute(sql.SQL("grant select, update on jobs to {}").format(role))
        conn.execute(sql.SQL("grant select on documents to {}").format(role))

    def reset(self, conn):
        conn.execute("truncate jobs restart identity")

    def enqueue(self, conn, jobs, *, max_attempts):
        for job in jobs:
            (my_id,) = conn.execute("insert into jobs (args, max_attempts) values (%s, %s) returning id",
                                    [hosted.Jsonb(hosted.job_args(job)), max_attempts]).fetchone()
            hosted.record_ids(conn, [(job.id, my_id)])

    def pending(self, conn):
        return conn.execute(
            "select count(*) from jobs where status in ('queued', 'running')").fetchone()[0]

    def final_states(self, conn):
        ids = hosted.schedule_ids(conn)
        states = {"queued": "queued", "running": "running", "done": "done", "failed": "dead"}
        return [{"id": ids[str(i)], "tenant_id": args["tenant"], "status": states.get(status, status),
                 "attempts": attempts, "last_error": error, "lease_expired": None}
                for i, args, status, attempts, error in
                conn.execute("select id, args, status, attempts, last_error from jobs order by id")]

    def run_worker(self, ctx):
        import psycopg

        with ConnectionPool(ctx.worker_dsn, min_size=2, max_size=2, open=True) as pool, \
                psycopg.connect(ctx.worker_dsn, autocommit=True) as queue:
            pool.wait()
            while ctx.may_dequeue():
                row = queue.execute(CLAIM).fetchone()
                if row is None:
                    time.sleep(ctx.poll)
                    continue
                job_id, args, attempts = row
                try:
                    with pool.connection() as conn, tenant(conn, args.get("tenant"), scope=self.scope):
                        # the job's own code, run inside the body: its statements are the job's
                        hosted.run_job(ctx, args, attempt=attempts, conn=conn,
                                       work=lambda: count_documents(conn))  # noqa: B023 - called at once
                except Exception as exc:
                    queue.execute(FAILED, [str(exc), job_id])
                else:
                    queue.execute(DONE, [job_id])
