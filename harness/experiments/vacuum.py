"""Experiment 6, vacuum: what a long job holds back, by how it holds its transaction.

One long job runs in one of five ways while a second worker processes short jobs on a queue
table of our own; then VACUUM (VERBOSE) reports how many dead row versions it could remove and
how many were "dead but not yet removable". The long job stays open until VACUUM has run (the
article's 20-second job outlived its 5,000 short jobs), and ends at the latest after its duration.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time

import psycopg
from psycopg import sql

from ...core import sqlfile
from ...workers.body.execution import Q as BODY
from .common import Context, plot

Q = sqlfile.load(__file__, "vacuum.sql", "create", "drop", "short_job", "claim_for_update", "write",
                 "lease_claim", "lease_finish", "read_only", "vacuum")

WAYS = {
    "nothing held": "no long job",
    "one-transaction (FOR UPDATE)": "held back: FOR UPDATE writes to the row",
    "long transaction that wrote": "held back",
    "lease, work outside a transaction": "nothing held back",
    "READ COMMITTED, only read": "nothing held back",
}
TUPLES = re.compile(r"tuples: (\d+) removed, (\d+) remain, (\d+) are dead but not yet removable")


class LongJob(threading.Thread):
    """The long job, on its own connection, in one of the five ways; ends on :meth:`stop` or timeout."""

    def __init__(self, dsn: str, way: str, seconds: float):
        super().__init__(daemon=True, name=f"exp-vacuum-{way}")
        self.dsn = dsn
        self.way = way
        self.seconds = seconds
        self.ready = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None
        self.held_s = 0.0

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=30)

    def run(self) -> None:
        t0 = time.monotonic()
        try:
            with psycopg.connect(self.dsn, autocommit=False,
                                 application_name="pg-job-chaos/exp-long") as conn:
                if self.way == "one-transaction (FOR UPDATE)":
                    conn.execute(Q.claim_for_update)
                elif self.way == "long transaction that wrote":
                    conn.execute(Q.write)
                elif self.way == "lease, work outside a transaction":
                    conn.execute(Q.lease_claim)
                    conn.commit()
                elif self.way == "READ COMMITTED, only read":
                    conn.execute(Q.read_only).fetchone()
                self.ready.set()
                self.done.wait(self.seconds)  # the work: idle in transaction, or outside one
                if self.way == "lease, work outside a transaction":
                    conn.execute(Q.lease_finish)
                conn.commit()
        except psycopg.Error as exc:
            self.error = str(exc).strip().splitlines()[0]
        finally:
            self.held_s = time.monotonic() - t0
            self.ready.set()


def _one_way(ctx: Context, admin, way: str, n: int, long_s: float) -> dict:
    admin.execute(sql.SQL(Q.create).format(n=sql.Literal(n), worker=sql.Identifier(ctx.database.worker_role)))
    long_job = None
    if way != "nothing held":
        long_job = LongJob(ctx.direct_worker_dsn, way, long_s)
        long_job.start()
        long_job.ready.wait(30)
    notices: list[str] = []

    def handler(diag) -> None:
        notices.append(diag.message_primary or "")

    try:
        with psycopg.connect(ctx.direct_worker_dsn, application_name="pg-job-chaos/exp-short") as conn:
            t0 = time.perf_counter()
            for _ in range(n):
                row = conn.execute(Q.short_job).fetchone()
                if row is None:
                    break
                conn.execute(BODY.set_tenant, {"tenant": str(row[1]), "local": True})
                conn.commit()
            seconds = time.perf_counter() - t0
        still_open = long_job is not None and long_job.is_alive()
        admin.add_notice_handler(handler)
        admin.execute(Q.vacuum)
    finally:
        if long_job is not None:
            long_job.stop()
        with contextlib.suppress(ValueError):
            admin.remove_notice_handler(handler)
        admin.execute(Q.drop)
    m = next((TUPLES.search(x) for x in notices if TUPLES.search(x)), None)
    removed, remain, not_yet = (int(g) for g in m.groups()) if m else (None, None, None)
    return {"way": way, "short_jobs": n, "removable": removed, "not_yet_removable": not_yet, "remain": remain,
            "seconds": round(seconds, 2), "jobs_per_s": round(n / seconds) if seconds else None,
            "long_job_open_at_vacuum": still_open if long_job else None,
            "long_job_error": long_job.error if long_job else None, "article": WAYS[way]}


def vacuum(ctx: Context) -> dict:
    n = ctx.jobs or ctx.pick(5000, 1000)
    long_s = max(20.0 * ctx.scale, 5.0)
    rows = []
    with psycopg.connect(ctx.database.admin_dsn, autocommit=True) as admin:
        for way in WAYS:
            ctx.progress(f"vacuum: {way}, {n} short jobs")
            rows.append(_one_way(ctx, admin, way, n, long_s))
    result = {"experiment": "vacuum", "rows": rows,
              "article": "only a long transaction that had written (SELECT ... FOR UPDATE counts) held "
                         "VACUUM back; the lease design with the work outside a transaction and a READ "
                         "COMMITTED "
                         "reader held nothing; throughput 6.6 s against 5.5-5.6 s for 5,000 jobs",
              "long_job_max_s": long_s,
              "note": "'removable' counts what VACUUM itself removed: when nothing holds the horizon, page "
                      "pruning during the run has already removed most dead versions (compare 'remain')"}
    if ctx.plot_dir is not None:
        def draw(ax):
            xs = range(len(rows))
            ax.bar([x - 0.2 for x in xs], [r["removable"] or 0 for r in rows], width=0.4, label="removed")
            ax.bar([x + 0.2 for x in xs], [r["not_yet_removable"] or 0 for r in rows], width=0.4,
                   label="dead but not yet removable")
            ax.set_xticks(list(xs), [r["way"] for r in rows], rotation=15, ha="right", fontsize=7)
            ax.set_ylabel("row versions (VACUUM VERBOSE)")
            ax.set_title("What a long job holds back")
            ax.legend()
        result["plots"] = [plot(ctx.plot_dir / "vacuum.png", draw)]
    return result
