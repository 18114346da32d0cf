"""A user's own worker that stops by itself: with ``--design-option stop_after=N`` its ``run_worker`` logs
why and returns after N jobs, whatever the dequeue budget -- as procrastinate's worker returns after its
listener fails. Without the option it runs until the budget is spent, as every worker should.
Loaded as ``--design tests.own_stops:StopsByItself`` (``tests/integration/test_worker_exits.py``)."""

from __future__ import annotations

import logging
import time

import psycopg

from pg_job_chaos.workers import hosted
from tests.own_declares import CLAIM, FAILED, OwnTable

log = logging.getLogger("own_stops")


def said(n: int) -> str:
    """What the worker logs, last, as it stops by itself after *n* jobs."""
    return f"stopping by myself after {n} job(s), jobs may remain"


class StopsByItself(OwnTable):
    name = "stops-by-itself"
    OPTIONS = {"stop_after": "return from run_worker after this many jobs (default: never)"}

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
                    conn.execute("update own_jobs set status = 'done' where id = %s", [my_id])
