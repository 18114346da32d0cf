"""Planted bugs: realistic mistakes a queue library could ship, each a small subclass of a
built-in design, each one the search must find with its default budget (tests/chaos/test_planted.py
asserts it, ``run.py bench`` times it). They are fixtures for the search, not designs offered to users:
:data:`CASES` names each with the faults that expose it and the property that must find it; a design
spec is :func:`spec` (``pg_job_chaos.harness.bench.planted:NAME``)."""

from __future__ import annotations

import dataclasses

from ...core import sqlfile
from ...workers.body.execution import Claimed
from ...workers.builtin.heartbeat import Heartbeat, LeaseHeartbeat, LeaseLost
from ...workers.builtin.lease import FencedOut, LeaseFenced
from ...workers.builtin.lease import Q as LEASE

CASES = [  # (bug, faults, the property that must find it)
    ("CountAtFinish", "crash", "attempts-counted"),
    ("RaiseLimitOnRetry", "raise", "bounded-attempts"),
    ("RequeueResetsCounter", "raise", "attempts-counted"),
    ("ClaimIgnoresMax", "crash", "bounded-blast-radius"),
    ("NoLeaseCheckBeforeEffect", "pause", "no-stale-effect"),
    ("HeartbeatAnyAttempt", "pause", "no-stale-effect"),
    ("UnfencedFinish", "pause", "single-commit"),
    ("SessionTenant", "", "tenant-isolation"),
    ("WorkInTransaction", "slow", "horizon"),
    ("AckOnError", "raise", "done-means-committed"),
    ("ReadsAfterTenantEnded", "", "tenant-isolation"),
    ("NeverRetries", "raise", "transient-recovers"),
    ("ClaimReadThenWrite", "pause", "single-commit"),
    ("SweepWritesBackStale", "crash,pause", "success-final"),
    ("LateHandlerFailsFinished", "raise", "success-final"),
    ("SplitFinish", "crash", "single-commit"),
]


def spec(bug: str) -> str:
    """The design spec ``load_design`` takes for planted bug *bug*."""
    return f"{__name__}:{bug}"


Q = sqlfile.load(__file__, "planted.sql", "claim_uncounted", "finish_counting", "fail_counting",
                 "fail_raise_limit", "fail_reset_counter", "claim_ignores_max", "heartbeat_any_attempt",
                 "fail_acknowledges", "fail_final", "claim_pick", "claim_by_id", "claim_queued", "sweep_read",
                 "sweep_write_back")


def _claim(conn, statement: str, lease: float):
    row = conn.execute(statement, {"lease": lease}).fetchone()
    conn.commit()
    return None if row is None else Claimed(*row)


def _fail(ctx, ex, statement: str, error: str) -> None:
    with ctx.pool.connection() as conn:
        conn.execute(statement, {"id": ex.job.id, "attempt": ex.job.attempt, "error": error})
        conn.commit()


class CountAtFinish(LeaseFenced):
    """Counts an attempt when it ends (finish or failure): a crash is never counted."""

    name = "planted-count-at-finish"

    def claim(self, ctx, conn):
        return _claim(conn, Q.claim_uncounted, ctx.lease)

    def finish(self, ex) -> None:
        if ex.conn.execute(Q.finish_counting, {"id": ex.job.id, "attempt": ex.job.attempt}).rowcount == 0:
            ex.fenced()
            raise FencedOut(f"job {ex.job.id} attempt {ex.job.attempt} was taken over")

    def on_error(self, ctx, ex, exc) -> None:
        if not isinstance(exc, FencedOut):
            with ctx.pool.connection() as conn:
                conn.execute(Q.fail_counting, {"id": ex.job.id, "error": str(exc)[:200]})
                conn.commit()


class RaiseLimitOnRetry(LeaseFenced):
    """Recovery raises a failing job's max_attempts: it is retried forever."""

    name = "planted-raise-limit"

    def on_error(self, ctx, ex, exc) -> None:
        if not isinstance(exc, FencedOut):
            _fail(ctx, ex, Q.fail_raise_limit, str(exc)[:200])


class RequeueResetsCounter(LeaseFenced):
    """A requeued job's attempts start again from 0."""

    name = "planted-requeue-resets"

    def on_error(self, ctx, ex, exc) -> None:
        if not isinstance(exc, FencedOut):
            _fail(ctx, ex, Q.fail_reset_counter, str(exc)[:200])


class AckOnError(LeaseFenced):
    """The error handler acknowledges a failed job (marks it done): a raise loses the job."""

    name = "planted-ack-on-error"

    def on_error(self, ctx, ex, exc) -> None:
        if not isinstance(exc, FencedOut):
            _fail(ctx, ex, Q.fail_acknowledges, str(exc)[:200])


class NeverRetries(LeaseFenced):
    """The first failure is final: a job that would succeed on its second attempt ends dead."""

    name = "planted-never-retries"

    def on_error(self, ctx, ex, exc) -> None:
        if not isinstance(exc, FencedOut):
            _fail(ctx, ex, Q.fail_final, str(exc)[:200])


class ClaimReadThenWrite(LeaseHeartbeat):
    """Claims in two statements -- reads the oldest queued job, then takes it by id -- without checking
    that it is still queued: two workers between the statements both take it (no point of the body
    lies there; only a strike between the design's own statements shows it without luck)."""

    name = "planted-claim-read-then-write"

    def claim(self, ctx, conn):
        row = conn.execute(Q.claim_pick).fetchone()
        if row is None:
            conn.commit()
            return None
        row = conn.execute(Q.claim_by_id, {"id": row[0], "lease": ctx.lease}).fetchone()
        conn.commit()
        return None if row is None else Claimed(*row)


class ClaimIgnoresMax(LeaseHeartbeat):
    """A job whose lease expired is claimable again whatever its attempts: a crashing job kills
    worker after worker."""

    name = "planted-claim-ignores-max"

    def claim(self, ctx, conn):
        return _claim(conn, Q.claim_ignores_max, ctx.lease)


class NoLeaseCheckBeforeEffect(LeaseHeartbeat):
    """Sends the effect without confirming the lease first: a worker back from a pause sends late."""

    name = "planted-no-lease-check"

    def confirm_lease(self, hb, ex) -> None:
        pass


class _AnyAttemptHeartbeat(Heartbeat):
    SQL = Q.heartbeat_any_attempt


class HeartbeatAnyAttempt(LeaseHeartbeat):
    """The heartbeat does not check the attempt, so a worker that lost its job keeps "its" lease."""

    name = "planted-heartbeat-any-attempt"
    heartbeat = _AnyAttemptHeartbeat


class UnfencedFinish(LeaseHeartbeat):
    """The heartbeat design without the fence on its finish."""

    name = "planted-unfenced-finish"
    fenced = False


class SessionTenant(LeaseHeartbeat):
    """Sets the tenant with the session-level form whatever the tenant mode says."""

    name = "planted-session-tenant"

    def run_worker(self, ctx) -> None:
        ctx.mode = dataclasses.replace(ctx.mode, local=False)  # the bug: SET, not SET LOCAL
        super().run_worker(ctx)


class ReadsAfterTenantEnded(LeaseHeartbeat):
    """Sets the tenant locally in a transaction of its own, commits it, then reads: the reads run
    without the tenant, and forced row-level security answers them with nothing, not an error."""

    name = "planted-reads-after-tenant-ended"

    def read(self, ex):
        ex.read_inherited()
        ex.point("before-tenant")
        ex.set_tenant()
        ex.conn.commit()  # the bug: the local setting ends here
        ex.read_invoices()
        started = ex.conn.execute("select clock_timestamp()").fetchone()[0]
        ex.conn.commit()
        return started


class WorkInTransaction(LeaseHeartbeat):
    """Inserts its job_runs row first and keeps that transaction open across the work."""

    name = "planted-work-in-transaction"

    def work(self, ctx, ex) -> None:
        ex.started(lease_until=ex.t_started + ctx.lease)
        with self.heartbeat(ctx, ex) as hb:
            ex.read_inherited()
            ex.point("before-tenant")
            ex.set_tenant()
            ex.insert_run()  # an xid from here to the commit, across the whole work
            ex.point("after-insert")
            ex.read_invoices()
            ex.work()
            if not hb.beat():
                raise LeaseLost(f"job {ex.job.id}: lease lost")
            ex.effect()
            ex.point("before-finish")
            self.finish(ex)
            ex.finish_run()
            ex.conn.commit()
        ex.finished()


class SweepWritesBackStale(LeaseHeartbeat):
    """Its claim takes queued jobs only; when idle, a sweep puts back every job whose lease expired --
    queued while attempts remain, dead at the last -- but it reads the expired rows, decides in Python, and
    writes each back by id without checking it is still what it read: a job that another worker re-claimed
    and finished in between is turned back (a crashed attempt's expired lease, then a stop between the
    sweep's read and its write: only a strike between the design's own statements shows it)."""

    name = "planted-sweep-writes-back"

    def claim(self, ctx, conn):
        return _claim(conn, Q.claim_queued, ctx.lease)

    def idle(self, ctx) -> None:
        with ctx.pool.connection() as conn:
            rows = conn.execute(Q.sweep_read).fetchall()
            for job_id, attempts, max_attempts in rows:
                status = "dead" if attempts >= max_attempts else "queued"
                conn.execute(Q.sweep_write_back, {"id": job_id, "status": status})
            conn.commit()


class LateHandlerFailsFinished(LeaseHeartbeat):
    """Sends its effect once the finish has committed (a notification "when it is done"), and its error
    handler fails the job by id without checking it is still running: an error after the finish turns the
    finished job back to queued -- or dead, at its last attempt."""

    name = "planted-late-handler"

    def complete(self, ex, started) -> None:
        ex.point("before-finish")
        with ex.finishing(started):
            ex.point("after-insert")
            self.finish(ex)
        ex.effect()  # after the commit: an error here comes after the job is done

    def on_error(self, ctx, ex, exc) -> None:
        if not isinstance(exc, LeaseLost | FencedOut):
            _fail(ctx, ex, LEASE.fail, str(exc)[:200])  # lease's unfenced failure: by id, whatever its state


class SplitFinish(LeaseHeartbeat):
    """Commits its work (the job_runs row) in one transaction and marks the job done in the next: a
    worker that dies between the two commits leaves a committed success on a job still running, and the
    next attempt commits another (no named point of the body lies there; a strike after the first
    COMMIT shows it: ``sql:commit:body.insert_finished_run:after``)."""

    name = "planted-split-finish"

    def complete(self, ex, started) -> None:
        ex.effect()
        ex.point("before-finish")
        if ex.ctx.mode.autocommit:
            ex.conn.execute("begin")
        ex.set_tenant()
        ex.insert_finished_run(started)
        ex.point("after-insert")
        ex.conn.commit()  # the bug: the work is committed, the job not yet done
        self.finish(ex)
        ex.conn.commit()
