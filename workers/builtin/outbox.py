"""``lease-outbox``: ``lease-heartbeat``'s fenced lease, with an outbox instead of a direct effect,
a relay that delivers with an idempotency key, and transactions the server bounds.

* The job never sends its effect. In the one short finishing transaction it inserts its
  ``job_runs`` row, finishes fenced, and writes an **outbox row** whose idempotency key is derived
  from the job and the effect's index within it (:func:`effect_key`), never from the attempt: every
  attempt owes the world the *same* effect. Only the attempt whose fenced finish commits owes it.
* A **relay** in the worker delivers the row right after that commit -- ``before-deliver``, the
  send with its key, ``after-deliver``, then marks it delivered. A crash, kill or hang between
  the send and the mark leaves the row undelivered; when its relay lease expires, any worker's
  idle **sweep** claims it and delivers it again, and the world acknowledges the repeated key
  without doing it again (``core.world``). The relay runs in the worker, not in a process of the
  supervisor's, so that its strike points are a worker's like the body's (the same faults, the
  same handshake, replayed the same way) and a dead relay is a dead worker the supervisor already
  replaces; the sweep passes no strike points, so a fault strikes a delivery once per execution.
* Every session of this design (pool and heartbeat) starts with ``statement_timeout``,
  ``idle_in_transaction_session_timeout`` and ``transaction_timeout`` set from the lease
  (:func:`session_limits`): a transaction hung at a point is ended by PostgreSQL, not by our max
  runtime. A session the server cut is logged as ``session-cut``: ``pool-hygiene`` budgets its
  reconnect like a ``terminate`` fault.
* The heartbeat, max runtime and sweep to ``dead`` are ``lease-heartbeat``'s; the relay has its
  own max runtime (:class:`Watchdog`).
"""

from __future__ import annotations

import os
import threading

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...core import sqlfile
from ...core.events import LogEvent
from ...core.schedule import POINTS
from ...core.world import World
from ..body.execution import describe
from .heartbeat import EXIT_ABANDONED, LeaseHeartbeat, LeaseLost
from .lease import Q as LEASE

Q = sqlfile.load(__file__, "outbox.sql", "create_outbox", "grant_outbox", "clear_outbox", "insert_outbox",
                 "mark_delivered", "relay_claim", "pending")

# Server-side limits as fractions of the lease. ``horizon`` judges a transaction held when it is
# older than half a lease (properties/health.py HORIZON_LEASE_FRACTION) and samples four times a
# lease: a transaction the server ends at 0.4 of a lease is never seen past 0.5. A statement or an
# idle stretch inside a transaction is cut at 0.3; the whole transaction at 0.4, whatever mix.
# Hazard: a worker waiting for the supervisor at a point inside a transaction counts against
# these limits; the handshake takes milliseconds (a 10 ms supervisor tick), 0.3 of a lease is
# 150 ms at time scale 0.5 -- keep the time scale at 0.5 or more on a loaded machine.
STATEMENT_LEASE_FRACTION = 0.3
IDLE_IN_TRANSACTION_LEASE_FRACTION = 0.3
TRANSACTION_LEASE_FRACTION = 0.4
RELAY_BATCH = 10  # outbox rows one sweep claims at most
CUT_SQLSTATES = {"25P03": "idle-in-transaction timeout", "25P04": "transaction timeout"}


def effect_key(job: int, index: int = 0) -> str:
    """The idempotency key of the *index*-th effect of *job*: the same for every attempt."""
    return f"job:{job}:effect:{index}"


def session_limits(lease: float) -> dict[str, int]:
    """The server settings every session of this design starts with, in milliseconds."""
    return {"statement_timeout": round(STATEMENT_LEASE_FRACTION * lease * 1000),
            "idle_in_transaction_session_timeout": round(IDLE_IN_TRANSACTION_LEASE_FRACTION * lease * 1000),
            "transaction_timeout": round(TRANSACTION_LEASE_FRACTION * lease * 1000)}


def bounded_dsn(dsn: str, limits: dict[str, int]) -> str:
    """*dsn* with *limits* appended to its ``options`` (kept, not replaced)."""
    options = conninfo_to_dict(dsn).get("options") or ""
    extra = " ".join(f"-c {name}={ms}" for name, ms in limits.items())
    return make_conninfo(dsn, options=f"{options} {extra}".strip())


def cut_reason(exc: BaseException) -> str | None:
    """Which server limit ended the session, when *exc* says the server cut it."""
    state = getattr(exc, "sqlstate", None)
    if state in CUT_SQLSTATES:
        return CUT_SQLSTATES[state]
    text = str(exc)
    return next((why for why in CUT_SQLSTATES.values() if why in text), None)


class Watchdog:
    """The relay's max runtime: a delivery hung longer than ``ctx.max_runtime`` ends the process, as
    the heartbeat does for a job (the row stays undelivered; a sweep delivers it)."""

    def __init__(self, ctx, ex):
        self.ctx = ctx
        self.ex = ex
        self._timer = threading.Timer(ctx.max_runtime, self._abandon)
        self._timer.daemon = True

    def _abandon(self) -> None:
        self.ctx.log.write(LogEvent.ABANDONED, job=self.ex.job.id, attempt=self.ex.job.attempt,
                           during="delivery")
        os._exit(EXIT_ABANDONED)

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()


class LeaseOutbox(LeaseHeartbeat):
    name = "lease-outbox"
    points = POINTS  # the job's points and the relay's
    # and the relay's sweep, which claims an undelivered row another relay left behind
    recovery_statements: tuple[str, ...] = ("lease.claim", "lease.sweep", "outbox.relay_claim")
    PENDING_SQL = Q.pending  # effects still owed keep the run going, like jobs still queued

    def install(self, conn, *, worker_role: str) -> None:
        conn.execute(Q.create_outbox)
        conn.execute(sql.SQL(Q.grant_outbox).format(worker=sql.Identifier(worker_role)))

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        conn.execute(Q.clear_outbox)
        super().enqueue(conn, jobs, max_attempts=max_attempts)

    def run_worker(self, ctx) -> None:
        limits = session_limits(ctx.lease)
        ctx.spec.worker_dsn = bounded_dsn(ctx.spec.worker_dsn, limits)  # the pool's and the heartbeat's
        ctx.log.write(LogEvent.SESSION_LIMITS, **limits)
        self.world = World(ctx.spec.run_dir)
        super().run_worker(ctx)

    def work(self, ctx, ex) -> None:
        conn = ex.conn
        ex.started(lease_until=ex.t_started + ctx.lease)
        with self.heartbeat(ctx, ex) as hb:
            started = self.read(ex)
            # 2. the long part, outside any transaction; no effect is sent from here
            ex.work()
            if not hb.beat():
                raise LeaseLost(f"job {ex.job.id} attempt {ex.job.attempt}: lease lost before the finish")
            ex.point("before-finish")
            # 3. one short transaction: job_runs row, fenced finish, the effect owed (outbox row)
            with ex.finishing(started):
                ex.point("after-insert")
                self.finish(ex)  # raises FencedOut: then no outbox row is written
                key = effect_key(ex.job.id)
                row = conn.execute(Q.insert_outbox, {"job": ex.job.id, "attempt": ex.job.attempt, "key": key,
                                                     "lease": ctx.lease}).fetchone()[0]
                ex.point("after-effect")
        self.relay(ctx, ex, row, key)
        ex.finished()

    def relay(self, ctx, ex, row: int, key: str) -> None:
        """Deliver this execution's committed outbox row. A failure leaves it to a sweep."""
        conn = ex.conn
        with Watchdog(ctx, ex):
            try:
                ex.point("before-deliver")
                self.world.send(ctx.log, job=ex.job.id, attempt=ex.job.attempt, key=key, relay="relay")
                ex.point("after-deliver")
                conn.execute(Q.mark_delivered, {"id": row})
                conn.commit()
            except Exception as exc:  # the job is done; an undelivered row is the sweep's
                self._relay_failed(ctx, conn, exc, job=ex.job.id, attempt=ex.job.attempt)

    def _relay_failed(self, ctx, conn, exc: BaseException, **fields) -> None:
        ctx.log.write(LogEvent.RELAY_ERROR, error=describe(exc), **fields)
        self._note_cut(ctx, exc, **fields)
        try:
            conn.rollback()
        except psycopg.Error:
            pass  # a broken connection: the pool replaces it when it comes back

    def _note_cut(self, ctx, exc: BaseException, **fields) -> None:
        why = cut_reason(exc)
        if why is not None:
            ctx.log.write(LogEvent.SESSION_CUT, reason=why, **fields)

    def on_error(self, ctx, ex, exc) -> None:
        self._note_cut(ctx, exc, job=ex.job.id, attempt=ex.job.attempt)
        super().on_error(ctx, ex, exc)

    def idle(self, ctx) -> None:
        """The job sweep (``lease-heartbeat``'s), then the relay sweep: re-deliver what no relay
        marked delivered within its lease. A failure here is logged; the next idle tries again."""
        with ctx.pool.connection() as conn:
            try:
                n = conn.execute(LEASE.sweep).rowcount
                conn.commit()
                if n:
                    ctx.log.write(LogEvent.SWEPT, jobs=n)
                rows = conn.execute(Q.relay_claim, {"lease": ctx.lease, "batch": RELAY_BATCH}).fetchall()
                conn.commit()
                for row, job, attempt, key in rows:
                    self.world.send(ctx.log, job=job, attempt=attempt, key=key, relay="sweep")
                    conn.execute(Q.mark_delivered, {"id": row})
                    conn.commit()
            except psycopg.Error as exc:
                self._relay_failed(ctx, conn, exc)
