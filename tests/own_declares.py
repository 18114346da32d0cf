"""A user's own worker that runs each job and its finish in one transaction, on a connection its own
tenant code prepared (``set_config('app.current_tenant', ..., true)``), with ``accepted_finishes`` and
``lease_seconds`` as the guide writes them (issue 46). ``Declares`` declares what it does and passes
``check-design``; ``Forgets`` makes the three mistakes that gave false verdicts (``core/misdeclared.py``):
no ``tenant_setting``, a lease known only in the worker process, and its finish dated ``now()``.
Loaded by path, ``--design tests/own_declares.py:Forgets``, as a user's file is."""

from __future__ import annotations

import time

import psycopg
from psycopg import sql

from pg_job_chaos.workers import hosted

SCHEMA = """
create table if not exists own_jobs (
    id bigserial primary key, args jsonb not null, status text not null default 'queued',
    attempts int not null default 0, max_attempts int not null, last_error text,
    claimed_at timestamptz, finished_at timestamptz
)"""
CLAIM = """
update own_jobs set status = 'running', attempts = attempts + 1, claimed_at = now()
 where id = (select id from own_jobs where status = 'queued' order by id limit 1 for update skip locked)
returning id, args, attempts"""
FAILED = """update own_jobs set last_error = %s,
       status = case when attempts >= max_attempts then 'failed' else 'queued' end where id = %s"""
STATES = {"queued": "queued", "running": "running", "done": "done", "failed": "dead"}


class OwnTable(hosted.HostedDesign):
    """A user's own jobs table (``own_jobs``): what any design on it declares (``tests/own_stops.py``
    runs a worker of its own on it too)."""

    pool_first = False

    def install(self, conn, *, worker_role):
        conn.execute(SCHEMA)
        conn.execute(sql.SQL("grant select, update on own_jobs to {}").format(sql.Identifier(worker_role)))

    def reset(self, conn):
        conn.execute("truncate own_jobs restart identity")

    def enqueue(self, conn, jobs, *, max_attempts):
        for job in jobs:
            (my_id,) = conn.execute("insert into own_jobs (args, max_attempts) values (%s, %s) returning id",
                                    [hosted.Jsonb(hosted.job_args(job)), max_attempts]).fetchone()
            hosted.record_ids(conn, [(job.id, my_id)])

    def pending(self, conn):
        return conn.execute("select count(*) from own_jobs where status = 'queued' or (status = 'running' "
                            "and claimed_at > now() - make_interval(secs => %s))", [self.lease]).fetchone()[0]

    def final_states(self, conn):
        ids = hosted.schedule_ids(conn)
        return [{"id": ids[str(i)], "tenant_id": args["tenant"], "status": STATES.get(status, status),
                 "attempts": attempts, "last_error": error, "lease_expired": None}
                for i, args, status, attempts, error in
                conn.execute("select id, args, status, attempts, last_error from own_jobs order by id")]


class Declares(OwnTable):
    name = "declares"
    tenant_setting = "app.current_tenant"  # what its tenant code sets
    FINISHED_AT = "clock_timestamp()"  # when the finish statement runs
    visibility: float | None = None  # the lease as run_worker saw it (Forgets' mistake reads it)

    def accepted_finishes(self, conn):
        ids = hosted.schedule_ids(conn)
        return {ids[str(i)]: {"finishes": [{"outcome": "success", "what": status, "at": at}]
                              if status == "done" else [], "recorded": f"{status} after {attempts} attempts"}
                for i, status, attempts, at in
                conn.execute("select id, status, attempts, finished_at from own_jobs order by id")}

    def lease_seconds(self, schedule):
        return self.lease  # the guide's advice: the schedule's lease, on the run's view

    def run_worker(self, ctx):
        self.visibility = ctx.lease  # in the forked worker only
        done = sql.SQL("update own_jobs set status = 'done', finished_at = {} where id = %s").format(
            sql.SQL(self.FINISHED_AT))
        with psycopg.connect(ctx.worker_dsn, autocommit=True) as queue, \
                psycopg.connect(ctx.worker_dsn) as conn:
            while ctx.may_dequeue():
                row = queue.execute(CLAIM).fetchone()
                if row is None:
                    time.sleep(ctx.poll)
                    continue
                my_id, args, attempts = row
                try:
                    with conn.transaction():  # the job and its finish: one transaction
                        if args.get("tenant") is not None:
                            conn.execute("select set_config('app.current_tenant', %s, true)",
                                         [str(args["tenant"])])
                        hosted.run_job(ctx, args, attempt=attempts, conn=conn)
                        conn.execute(done, [my_id])
                except Exception as exc:
                    queue.execute(FAILED, [str(exc), my_id])


class Forgets(Declares):
    """Issue 46's three mistakes: tenant_setting left out, a lease known only in the worker process, and
    the finish dated now() -- its transaction's start, before the job ran."""

    name = "forgets"
    tenant_setting = hosted.HostedDesign.tenant_setting  # left out: the harness watches app.tenant
    FINISHED_AT = "now()"

    def lease_seconds(self, schedule):
        return self.visibility  # set in run_worker: None in the supervisor's process
