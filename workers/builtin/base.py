"""The base class the built-in designs share: the harness's own ``jobs`` table, one pool borrow per
dequeue. The protocol every design implements is ``workers/design.py``."""

from __future__ import annotations

import time

from psycopg.types.json import Jsonb

from ...core import sqlfile
from ...core.events import LogEvent
from ...core.idlemark import IdleMark
from ...core.schedule import JOB_POINTS, Schedule
from ..body.execution import describe
from ..interface import Clock
from ..tenant.modes import SETTING

Q = sqlfile.load(__file__, "queue.sql", "enqueue", "final_states")


class QueueDesign:
    """Base of the built-in designs: the shared ``jobs`` table, one pool borrow per dequeue."""

    name = "base"
    default_restart_delay = 0.0
    points: tuple[str, ...] = JOB_POINTS  # where faults can strike in this design's workers
    exit_outcomes: dict[int, str] = {}  # the design's own exit codes, named (see the heartbeat)
    tenant_setting = SETTING  # the harness's tenant modes set it
    pool_first = False
    min_time_scale: float | None = None
    hosted = False
    one_host = False  # psycopg takes the replicated back end's multi-host DSN
    tenant_cap: int | None = None  # the most of one tenant's jobs running at once it promises (None: none)
    # the statements by which it recovers another worker's jobs (workers/design.py): none for a design whose
    # row lock dies with the session (one-transaction)
    recovery_statements: tuple[str, ...] = ()
    PENDING_SQL = "select count(*) from jobs where status = 'queued'"

    def clock(self, schedule: Schedule) -> Clock:
        """A built-in design's lease is the schedule's (``basis`` ``schedule``), in real seconds."""
        return Clock(schedule.seconds(schedule.timing.lease), "schedule", "the schedule's lease")

    def install(self, conn, *, worker_role: str) -> None:
        pass

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        with conn.cursor() as cur:
            cur.executemany(Q.enqueue, [
                {"id": j.id, "tenant": j.tenant, "max_attempts": max_attempts,
                 "payload": Jsonb({"duration": j.duration, "fault": j.fault, "point": j.point,
                                  "strikes": j.strikes})}
                for j in jobs
            ])

    def pending(self, conn) -> int:
        return conn.execute(self.PENDING_SQL).fetchone()[0]

    def final_states(self, conn) -> list[dict]:
        cols = ("id", "tenant_id", "status", "attempts", "max_attempts", "last_error", "lease_expired")
        return [dict(zip(cols, row, strict=True)) for row in conn.execute(Q.final_states)]

    # --- the worker side -----------------------------------------------------------------------
    def run_worker(self, ctx) -> None:
        """Dequeue until the budget is spent: claim, run, and on failure let the design react. After
        each look that found nothing, and the design's :meth:`idle`, the worker's idle mark says when
        that look began (``core/idlemark.py``: the supervisor ends a run on it, not on a timer)."""
        ctx.open_pool()
        idle = IdleMark(ctx.spec.run_dir, ctx.identity)
        try:
            while ctx.may_dequeue():
                looked_at = time.monotonic()
                ran = self.dequeue(ctx)
                if not ran:
                    self.idle(ctx)
                    idle.mark(looked_at)
                    ctx.idle_sleep(ctx.poll)  # the supervisor may wake it (harness/supervisor/loop.py)
        finally:
            idle.close()

    def dequeue(self, ctx) -> bool:
        """One claim-and-run; True when a job was claimed. Subclasses implement :meth:`claim` and
        :meth:`work`; a failed execution is logged here after the pool rolled it back."""
        ex = None
        try:
            with ctx.pool.connection() as conn:
                job = self.claim(ctx, conn)
                if job is None:
                    conn.rollback()
                    return False
                ex = ctx.execution(conn, job)
                try:
                    self.work(ctx, ex)
                except BaseException:
                    # Hazard: the pool's rollback, as the connection goes back, releases the job;
                    # the failure is logged after it, so it is dated here (Execution.failed).
                    ex.left = (time.monotonic(), time.time())
                    raise
            return True
        except Exception as exc:
            if ex is None:
                # The claim itself failed (connection lost, prepared statement gone...): record it,
                # count it against the dequeue budget so a worker cannot spin forever, go on.
                ctx.dequeues += 1
                ctx.log.write(LogEvent.CLAIM_FAILED, error=describe(exc))
                return False
            ex.failed(exc)
            self.on_error(ctx, ex, exc)
            return True

    def body_in_transaction(self, ctx, ex, *, begin_after_tenant: bool) -> None:
        """Steps 2-7 of the job body with one work transaction open from the ``job_runs`` insert to
        the finish, as the article measured. *begin_after_tenant*: on an autocommit pool, open that
        transaction after the tenant is set (a session-level setting then outlives it)."""
        ex.read_inherited()
        ex.point("before-tenant")
        ex.set_tenant()
        if begin_after_tenant and ctx.mode.autocommit:
            ex.conn.execute("begin")
        ex.insert_run()
        ex.point("after-insert")
        ex.read_invoices()
        ex.work()
        ex.effect()
        ex.point("before-finish")

    def claim(self, ctx, conn):
        raise NotImplementedError

    def work(self, ctx, ex) -> None:
        raise NotImplementedError

    def on_error(self, ctx, ex, exc) -> None:
        """After a failed execution has been rolled back. Default: nothing (the article's naive design)."""

    def idle(self, ctx) -> None:
        """Called when nothing could be claimed (sweeps go here)."""
