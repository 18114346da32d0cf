"""``lease-heartbeat``: the article's recommendation, with a heartbeat, a maximum runtime and a sweep.

* The long work runs outside any transaction: reads in a short transaction (tenant set locally
  in it), the work and the side effect outside, then one short transaction that inserts the
  ``job_runs`` row together with the fenced finish.
* A heartbeat on the worker's **own** connection extends ``locked_until`` every ``lease / 4``,
  only for the attempt it claimed. Right before the side effect the worker beats once more,
  synchronously: a lease lost meanwhile (a pause, a partition) stops it before the effect.
* A maximum runtime: a hung job stops being heartbeated and the worker process is abandoned
  (it exits with :data:`EXIT_ABANDONED`; the supervisor replaces it).
* A sweep, when idle, marks ``dead`` what is ``running`` with an expired lease at max attempts.
* The fence stays the last line: a heartbeat can arrive late.
"""

from __future__ import annotations

import os
import threading
import time

import psycopg

from ...core.events import LogEvent
from ..body import statements
from ..body.execution import describe
from .lease import FencedOut, LeaseFenced, Q

EXIT_ABANDONED = 75  # the worker gave up a job after max runtime (EX_TEMPFAIL)


class LeaseLost(Exception):
    """The heartbeat found the job no longer carries this worker's attempt."""


class Heartbeat:
    """Extends one claimed attempt's lease from a thread, on a connection of its own."""

    SQL = Q.heartbeat  # extends only the attempt this worker claimed

    def __init__(self, ctx, ex):
        self.ctx = ctx
        self.ex = ex
        self.conn = ctx.own_connection("heartbeat")
        self.lost = False
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the thread and the synchronous beat share the connection
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._started = time.monotonic()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)  # the connection stays open for the worker's next job

    def beat(self, *, confirm: bool = False) -> bool:
        """Extend the lease now; False (and ``lost``) when the row has a newer attempt. A broken
        connection (its session terminated, the network cut) is replaced once and the beat retried;
        when that fails too the lease is unknown: the thread goes on trying (the fence decides at the
        finish), but a *confirm* -- right before the side effect -- says False: no effect on a lease
        nobody could confirm (found by a terminate between the design's statements)."""
        with self._lock:
            if self.lost:
                return False
            for retry in (False, True):
                try:
                    cur = self.conn.execute(self.SQL, {"id": self.ex.job.id, "attempt": self.ex.job.attempt,
                                                       "lease": self.ctx.lease})
                    break
                except psycopg.Error as exc:
                    self.ctx.log.write(LogEvent.HEARTBEAT_ERROR, job=self.ex.job.id,
                                       attempt=self.ex.job.attempt, error=describe(exc), retried=retry)
                    if retry:
                        return not confirm
                    try:
                        self.conn = self.ctx.own_connection("heartbeat")  # a broken one is replaced
                    except psycopg.Error:
                        return not confirm
            if cur.rowcount == 0:
                self.lost = True
                self.ctx.log.write(LogEvent.LEASE_LOST, job=self.ex.job.id, attempt=self.ex.job.attempt)
            return not self.lost

    def _run(self) -> None:
        statements.set_current(self.ex.job)  # this thread's statements are the job's heartbeats
        while not self._stop.wait(self.ctx.heartbeat):
            if time.monotonic() - self._started > self.ctx.max_runtime:
                # Hazard: Python cannot stop the job's thread; the only way to abandon the job is
                # to end the process. The lease then expires and the job is retried or swept.
                self.ctx.log.write(LogEvent.ABANDONED, job=self.ex.job.id, attempt=self.ex.job.attempt,
                                   after=round(time.monotonic() - self._started, 3))
                os._exit(EXIT_ABANDONED)
            if not self.beat():
                return


class LeaseHeartbeat(LeaseFenced):
    name = "lease-heartbeat"
    exit_outcomes = {EXIT_ABANDONED: "abandoned after max runtime"}
    heartbeat = Heartbeat  # the class that keeps the lease (a subclass may change how)
    recovery_statements: tuple[str, ...] = ("lease.claim", "lease.sweep")  # and the idle sweep to dead
    # the sweep acts on the rest
    PENDING_SQL = "select count(*) from jobs where status in ('queued', 'running')"

    def work(self, ctx, ex) -> None:
        ex.started(lease_until=ex.t_started + ctx.lease)
        with self.heartbeat(ctx, ex) as hb:
            started = self.read(ex)
            # 2. the long part, outside any transaction
            ex.work()
            self.confirm_lease(hb, ex)
            self.complete(ex, started)
        ex.finished()

    def complete(self, ex, started) -> None:
        """Step 3, under a confirmed lease: the side effect, then one short transaction with the job_runs
        row and the fenced finish together. A subclass may finish otherwise (the planted bugs do)."""
        ex.effect()
        ex.point("before-finish")
        with ex.finishing(started):
            ex.point("after-insert")
            self.finish(ex)

    def read(self, ex):
        """Step 1: the body's short reading transaction (:meth:`Execution.read_briefly`); returns the
        start time the finishing transaction records. A subclass may read otherwise."""
        return ex.read_briefly()

    def confirm_lease(self, hb: Heartbeat, ex) -> None:
        """Right before the side effect: beat once more, synchronously. A worker that lost its lease
        meanwhile (a pause, a partition) raises :class:`LeaseLost` and sends nothing."""
        if not hb.beat(confirm=True):
            raise LeaseLost(f"job {ex.job.id} attempt {ex.job.attempt}: lease lost (or not confirmed) before "
                            "the side effect")

    def on_error(self, ctx, ex, exc) -> None:
        if isinstance(exc, LeaseLost | FencedOut):
            return
        super().on_error(ctx, ex, exc)

    def idle(self, ctx) -> None:
        with ctx.pool.connection() as conn:
            n = conn.execute(Q.sweep).rowcount
            conn.commit()
        if n:
            ctx.log.write(LogEvent.SWEPT, jobs=n)
