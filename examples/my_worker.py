"""A user's own worker, hosted with ``--design examples/my_worker.py:MyWorker`` (protocol v2).

The queue is the user's: a table ``my_jobs``, a ``FOR UPDATE SKIP LOCKED`` claim that commits
``running`` and counts the attempt, the job, then ``done`` -- or, when the job raised, back to
``queued`` until ``max_attempts``. What it lacks is what most hand-written workers lack: nothing
ever looks at a job left ``running`` by a worker that died. The harness finds that in one small
schedule (README, "Test your own worker").
"""

from __future__ import annotations

import time

from psycopg import sql

from pg_job_chaos.workers import hosted

SCHEMA = """
create table if not exists my_jobs (
    id          bigserial primary key,
    args        jsonb not null,
    status      text not null default 'queued',
    attempts    int not null default 0,
    max_attempts int not null,
    last_error  text,
    claimed_at  timestamptz
);
"""
CLAIM = """
update my_jobs set status = 'running', attempts = attempts + 1, claimed_at = now()
 where id = (select id from my_jobs where status = 'queued' order by id limit 1 for update skip locked)
returning id, args, attempts
"""
DONE = "update my_jobs set status = 'done' where id = %(id)s"
FAILED = """
update my_jobs set last_error = %(error)s,
       status = case when attempts >= max_attempts then 'failed' else 'queued' end
 where id = %(id)s
"""


class MyWorker(hosted.HostedDesign):
    name = "my-worker"
    OPTIONS = {"poll": "seconds between polls when the queue is empty (default: the schedule's)"}

    def install(self, conn, *, worker_role):
        conn.execute(SCHEMA)
        conn.execute(sql.SQL("grant select, update on my_jobs to {}").format(sql.Identifier(worker_role)))

    def reset(self, conn):
        conn.execute("truncate my_jobs restart identity")

    def enqueue(self, conn, jobs, *, max_attempts):
        for job in jobs:
            (my_id,) = conn.execute("insert into my_jobs (args, max_attempts) values (%s, %s) returning id",
                                    [hosted.Jsonb(hosted.job_args(job)), max_attempts]).fetchone()
            hosted.record_ids(conn, [(job.id, my_id)])

    def pending(self, conn):
        # queued, or claimed so recently that its body may not have started yet
        return conn.execute("select count(*) from my_jobs where status = 'queued' or (status = 'running' "
                            "and claimed_at > now() - make_interval(secs => %s))", [self.lease]).fetchone()[0]

    def final_states(self, conn):
        ids = hosted.schedule_ids(conn)
        states = {"queued": "queued", "running": "running", "done": "done", "failed": "dead"}
        return [{"id": ids[str(i)], "tenant_id": args["tenant"], "status": states.get(status, status),
                 "attempts": attempts, "last_error": error, "lease_expired": None}
                for i, args, status, attempts, error in
                conn.execute("select id, args, status, attempts, last_error from my_jobs order by id")]

    def run_worker(self, ctx):
        import psycopg

        poll = float(self.options.get("poll", ctx.poll))
        with psycopg.connect(ctx.worker_dsn, autocommit=True,
                             application_name=f"{ctx.identity}/queue") as conn:
            while ctx.may_dequeue():
                row = conn.execute(CLAIM).fetchone()
                if row is None:
                    time.sleep(poll)
                    continue
                my_id, args, attempts = row
                try:
                    hosted.run_job(ctx, args, attempt=attempts)
                except Exception as exc:
                    conn.execute(FAILED, {"id": my_id, "error": str(exc)})
                else:
                    conn.execute(DONE, {"id": my_id})
