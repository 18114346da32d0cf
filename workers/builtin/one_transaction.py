"""``one-transaction`` and ``one-transaction-handler``: claim, work and finish in one transaction.

The row lock (``FOR UPDATE SKIP LOCKED``) is the claim: if the worker dies, the lock dies with
its session and the job is free again. But an error rolls back everything in the transaction --
the attempt counter and the ``job_runs`` row included -- so a poison job is never counted, and a
job that kills the process kills every worker that takes it. The handler variant counts failed
attempts in a new transaction (dead at ``max_attempts``); it cannot help when the process dies.
"""

from __future__ import annotations

from ...core import sqlfile
from ..body.execution import Claimed, describe
from .base import QueueDesign

Q = sqlfile.load(__file__, "one_transaction.sql", "claim", "count_attempt", "finish", "count_failure")


class OneTransaction(QueueDesign):
    name = "one-transaction"
    default_restart_delay = 0.0  # the article restarted at once: there is no lease to wait for

    def claim(self, ctx, conn):
        if ctx.mode.autocommit:
            conn.execute("begin")  # an autocommit pool: the design's transaction must be explicit
        row = conn.execute(Q.claim).fetchone()
        if row is None:
            return None
        job_id, tenant, attempts, payload = row
        conn.execute(Q.count_attempt, {"id": job_id})
        return Claimed(job_id, tenant, attempts + 1, payload)

    def work(self, ctx, ex) -> None:
        conn = ex.conn
        ex.started()
        self.body_in_transaction(ctx, ex, begin_after_tenant=False)  # the claim opened it
        conn.execute(Q.finish, {"id": ex.job.id})
        ex.finish_run()
        conn.commit()
        ex.finished()


class OneTransactionHandler(OneTransaction):
    name = "one-transaction-handler"

    def on_error(self, ctx, ex, exc) -> None:
        # A new transaction: the failed one is gone, and with it the count it made.
        with ctx.pool.connection() as conn:
            if ctx.mode.autocommit:
                conn.execute("begin")
            conn.execute(Q.count_failure, {"id": ex.job.id, "error": describe(exc)})
            conn.commit()
