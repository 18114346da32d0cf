"""A user's own worker that stops by itself: with ``--design-option stop_after=N`` its ``run_worker`` logs
why and returns after N jobs, whatever the dequeue budget -- as procrastinate's worker returns after its
listener fails. Without the option it runs until the budget is spent, as every worker should.
Loaded as ``--design tests.own_stops:StopsByItself`` (``tests/integration/test_worker_exits.py``)."""

from __future__ import annotations

import logging
import time

import psycopg
from psycopg import sql

from pg_job_chaos.workers import hosted

log = logging.getLogger("own_stops")

SCHEMA = """
create table if not exists stop_jobs (
    id bigserial primary key, args jsonb not null, status text not null default 'queued',
    attempts int not null default 0, max_attempts int not null, last_error text, claimed_at timestamptz
)"""
CLAIM = """
update stop_jobs set status = 'running', attempts = attempts + 1, claimed_at = now()
 where id = (select id from stop_jobs where status = 'queued' order by id limit 1 for update skip locked)
returning id, args, attempts"""
FAILED = """update stop_jobs set last_error = %s,
       status = case when attempts >= max_attempts then 'failed' else 'queued' end where id = %s"""
STATES = {"queued": "queued", "running": "running", "done": "done", "failed": "dead"}


def said(n: int) -> str:
    """What the worker logs, last, as it stops by itself after *n* jobs."""
    return f"stopping by myself after {n} job(s), jobs may remain"


class StopsByItself(hosted.HostedDesign):
    name = "stops-by-itself"
    pool_first = False
    OPTIONS = {"stop_after": "return from run_worker after this many jobs (default: never)"}

    def install(self, conn, *, worker_role):
        conn.execute(SCHEMA)
        conn.execute(sql.SQL("grant select, update on stop_jobs to {}").format(sql.Identifier(worker_role)))

    def reset(self, conn):
        conn.execute("truncate stop_jobs restart identity")

    def enqueue(self, conn, jobs, *, max_attempts):
        for job in jobs:
            (my_id,) = conn.execute("insert into stop_jobs (args, max_attempts) values (%s, %s) returning id",
                                    [hosted.Jsonb(hosted.job_args(job)), max_attempts]).fetchone()
            hosted.record_ids(conn, [(job.id, my_id)])

    def pending(self, conn):
        return conn.execute("select count(*) from stop_jobs where status = 'queued' or (status = 'running' "
                            "and claimed_at > now() - make_interval(secs => %s))", [self.lease]).fetchone()[0]

    def final_states(self, conn):
        ids = hosted.schedule_ids(conn)
        return [{"id": ids[str(i)], "tenant_id": args["tenant"], "status": STATES.get(status, status),
                 "attempts": attempts, "last_error": error, "lease_expired": None}
                for i, args, status, attempts, error in
                conn.execute("select id, args, status, attempts, last_error from stop_jobs order by id")]

    def run_worker(self, ctx):
        stop_after = int(self.options["stop_after"]) if self.options.get("stop_after") else None
        ran = 0
        with psycopg.connect(ctx.worker_dsn, autocommit=True,
                             application_name=f"{ctx.identity}/queue") as conn:
            while ctx.may_dequeue():
                if stop_after is not None and ran >= stop_after:
                    log.warning(said(ran))  # a warning: logged at the harness's default level too
                    return
                row = conn.execute(CLAIM).fetchone()
                if row is None:
                    time.sleep(ctx.poll)
                    continue
                my_id, args, attempts = row
                ran += 1
                try:
                    hosted.run_job(ctx, args, attempt=attempts)
                except Exception as exc:
                    conn.execute(FAILED, [str(exc), my_id])
                else:
                    conn.execute("update stop_jobs set status = 'done' where id = %s", [my_id])
