"""``lease`` and ``lease-fenced``: a committed claim with a lease, then one work transaction.

The claim commits ``running``, ``attempts + 1`` and ``locked_until`` in its own transaction, so
the attempt is counted before the work starts and a crash cannot undo it. The work transaction
then stays open from the ``job_runs`` insert to the finish, as the article measured -- which
holds back VACUUM's horizon for as long as the job works. A job that outlives its lease is
claimed again by another worker: unfenced, both finish; fenced, the late finish matches no row
and rolls back (its ``job_runs`` row disappears), but both did the work.
"""

from __future__ import annotations

from ...core import sqlfile
from ..body.execution import Claimed, describe
from .base import QueueDesign

Q = sqlfile.load(__file__, "lease.sql", "claim", "finish", "finish_fenced", "fail", "fail_fenced",
                 "heartbeat", "sweep")


class FencedOut(Exception):
    """The fenced finish matched no row: another worker holds a newer attempt."""


class Lease(QueueDesign):
    name = "lease"
    fenced = False
    default_restart_delay = 1.1  # the article started a fresh worker 1.1 s after a crash
    recovery_statements: tuple[str, ...] = ("lease.claim",)  # its claim takes over an expired lease
    PENDING_SQL = ("select count(*) from jobs where status = 'queued'"
                   " or (status = 'running' and attempts < max_attempts)")

    def claim(self, ctx, conn):
        row = conn.execute(Q.claim, {"lease": ctx.lease}).fetchone()
        conn.commit()  # the claim is durable before any work starts
        if row is None:
            return None
        job_id, tenant, attempts, payload = row
        return Claimed(job_id, tenant, attempts, payload)

    def work(self, ctx, ex) -> None:
        conn = ex.conn
        ex.started(lease_until=ex.t_started + ctx.lease)
        self.body_in_transaction(ctx, ex, begin_after_tenant=True)
        self.finish(ex)
        ex.finish_run()
        conn.commit()
        ex.finished()

    def finish(self, ex) -> None:
        if not self.fenced:
            ex.conn.execute(Q.finish, {"id": ex.job.id})
            return
        cur = ex.conn.execute(Q.finish_fenced, {"id": ex.job.id, "attempt": ex.job.attempt})
        if cur.rowcount == 0:
            ex.fenced()
            raise FencedOut(f"job {ex.job.id} attempt {ex.job.attempt} was taken over")

    def on_error(self, ctx, ex, exc) -> None:
        if isinstance(exc, FencedOut):
            return  # the job belongs to another attempt now: nothing of ours to record
        with ctx.pool.connection() as conn:
            if self.fenced:
                conn.execute(Q.fail_fenced,
                             {"id": ex.job.id, "attempt": ex.job.attempt, "error": describe(exc)})
            else:
                conn.execute(Q.fail, {"id": ex.job.id, "error": describe(exc)})
            conn.commit()


class LeaseFenced(Lease):
    name = "lease-fenced"
    fenced = True
