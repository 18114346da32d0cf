"""Experiments 1 and 2: tenant context on a pooled connection (leak) and what resetting costs.

Both use the tenant modes exactly as a worker does (``workers.tenant.modes.MODES[..].pool(...)``) and
the job body's own statements (``workers/body/body.sql``).
"""

from __future__ import annotations

import contextlib
import logging
import time

import psycopg

from ...core import sqlfile
from ...core.db import one
from ...workers.body.execution import Q as BODY
from ...workers.tenant.modes import MODES
from .common import Context, median_ms, plot

Q = sqlfile.load(__file__, "tenants.sql", "count_invoices", "fail", "timed_query")

LEAK_ARTICLE = {
    ("session", False): "20000, 10000, 6666 (leaks after success)",
    ("session", True): "20000, 20000, 6666 (the failed job leaves nothing; tenant 1 still there)",
    ("session-autocommit", False): "20000, 10000, 6666",
    ("session-autocommit", True): "20000, 10000, 6666 (the failed job leaks too)",
    ("local", False): "0, 0, 0",
    ("local", True): "0, 0, 0",
}


def _leak_run(dsn: str, mode_name: str, fail_job: int | None, *, other_worker: bool = False) -> list[int]:
    """Jobs for tenants 1, 2, 3 on one pool; after each, the next borrower counts the invoices it sees
    without setting a tenant. *other_worker*: that borrower is another worker's pool (another client
    connection), as when a pooler hands the same server session to another worker process."""
    mode = MODES[mode_name]
    counts = []
    pool = mode.pool(dsn, size=1, name=f"exp-leak-{mode_name}", application_name="pg-job-chaos/exp-leak")
    borrower = mode.pool(dsn, size=1, name=f"exp-leak-{mode_name}-other",
                         application_name="pg-job-chaos/exp-leak-other") if other_worker else pool
    try:
        for tenant in (1, 2, 3):
            try:
                with pool.connection() as conn:
                    conn.execute(BODY.set_tenant, {"tenant": str(tenant), "local": mode.local})
                    conn.execute(BODY.read_invoices, {"tenant": tenant}).fetchone()
                    if tenant == fail_job:
                        conn.execute(Q.fail)
            except psycopg.errors.DivisionByZero:
                pass  # the job failed; the pool rolled its transaction back (if it had one)
            with borrower.connection() as conn:  # the next borrower sets nothing
                counts.append(one(conn.execute(Q.count_invoices))[0])
    finally:
        pool.close()
        if borrower is not pool:
            borrower.close()
    return counts


def leak(ctx: Context) -> dict:
    """The article's table (``counts_after``: the next borrower of the same pool, direct), the next
    borrower being another worker (``other_worker_after``), and with ``--pooler`` both again through
    the pooler (``via_<pooler>``, ``other_worker_via_<pooler>``)."""
    db = ctx.database
    direct = db.direct_worker_dsn or db.worker_dsn
    pooler = db.pooler
    rows = []
    for mode_name in ("session", "session-autocommit", "local"):
        for fails in (False, True):
            fail_job = 2 if fails else None
            counts = _leak_run(direct, mode_name, fail_job)
            row = {"tenant_mode": mode_name, "tenant2_fails": fails, "counts_after": counts,
                   "other_worker_after": _leak_run(direct, mode_name, fail_job, other_worker=True)}
            if pooler is not None:
                row[f"via_{pooler}"] = _leak_run(db.worker_dsn, mode_name, fail_job)
                row[f"other_worker_via_{pooler}"] = _leak_run(db.worker_dsn, mode_name, fail_job,
                                                              other_worker=True)
            row.update(leaked=any(counts), article=LEAK_ARTICLE[(mode_name, fails)])
            rows.append(row)
    result = {"experiment": "leak", "rows": rows,
              "article": "a job that succeeds leaks its tenant (session); a failing job does not, except in "
                         "autocommit, which leaks both; set_config(.., true) leaks nothing"}
    if pooler is not None:
        result["note"] = (f"through {pooler}, the next borrower may be another worker: it sees what the "
                          "server session carries, whoever set it. The rows run in order on one PgBouncer: "
                          "in transaction mode nothing resets a server session, so even local's borrowers "
                          "find tenant 3, left by the session rows' clients (long closed) on the sessions "
                          "they used")
    return result


RESET_VARIANTS = ("session", "local", "reset", "reset-no-autocommit", "discard-all", "discard-all-unprepared")
RESET_ARTICLE = {
    "session": "0.33 ms (leaks)",
    "local": "0.35 ms",
    "reset": "about 0.6 ms",
    "reset-no-autocommit": "8.9 ms, 301 connections for 300 jobs",
    "discard-all": 'fails at job 7: prepared statement "_pg3_0" does not exist',
    "discard-all-unprepared": "works (prepare_threshold=None)",
}


class _Count(logging.Handler):
    """Counts the pool's warnings (the only trace of a discarded connection) instead of printing them."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.n = 0

    def emit(self, record):
        self.n += 1


@contextlib.contextmanager
def _pool_warnings():
    logger = logging.getLogger("psycopg.pool")
    counter = _Count()
    propagate = logger.propagate
    logger.addHandler(counter)
    logger.propagate = False
    try:
        yield counter
    finally:
        logger.removeHandler(counter)
        logger.propagate = propagate


def _reset_series(ctx: Context, mode_name: str, jobs: int, skip: int) -> dict:
    with _pool_warnings() as warnings:
        out = _reset_jobs(ctx, mode_name, jobs, skip)
    out["pool_warnings"] = warnings.n
    return out


def _reset_jobs(ctx: Context, mode_name: str, jobs: int, skip: int) -> dict:
    mode = MODES[mode_name]
    pool = mode.pool(ctx.database.worker_dsn, size=1, name=f"exp-reset-{mode_name}",
                     application_name="pg-job-chaos/exp-reset")
    times: list[float] = []
    errors = 0
    first_error = None
    failed_at = None
    try:
        for i in range(1, jobs + 1):
            tenant = (i - 1) % 100 + 1
            t0 = time.perf_counter()
            try:
                with pool.connection() as conn:
                    conn.execute(BODY.set_tenant, {"tenant": str(tenant), "local": mode.local})
                    conn.execute(Q.timed_query, {"tenant": tenant}).fetchall()
            except psycopg.Error as exc:
                errors += 1
                if failed_at is None:
                    failed_at = i
                    first_error = str(exc).strip().splitlines()[0]
                continue
            if i > skip:
                times.append(time.perf_counter() - t0)
        with contextlib.suppress(Exception):
            pool.wait(timeout=5.0)  # a discarded connection is replaced in the background
        opened = pool.get_stats().get("connections_num", 0)
    finally:
        pool.close()
    return {"median_ms": median_ms(times), "connections_opened": opened, "errors": errors,
            "failed_at_job": failed_at, "error": first_error, "times": times}


def reset_cost(ctx: Context) -> dict:
    jobs = ctx.pick(2000, 300)
    skip = ctx.pick(200, 30)
    slow_jobs = ctx.pick(300, 60)
    slow_skip = ctx.pick(200, 20)
    series: dict[str, list[dict]] = {v: [] for v in RESET_VARIANTS}
    for run in (1, 2):
        for variant in RESET_VARIANTS:
            n, s = (slow_jobs, slow_skip) if variant == "reset-no-autocommit" else (jobs, skip)
            ctx.progress(f"reset-cost: series {run}, {variant}, {n} jobs")
            series[variant].append(_reset_series(ctx, variant, n, s))
    rows = []
    for variant, runs in series.items():
        n = slow_jobs if variant == "reset-no-autocommit" else jobs
        rows.append({"variant": variant, "jobs": n, "median_ms": [r["median_ms"] for r in runs],
                     "connections_opened": [r["connections_opened"] for r in runs],
                     "errors": [r["errors"] for r in runs],
                     "pool_warnings": [r["pool_warnings"] for r in runs],
                     "failed_at_job": [r["failed_at_job"] for r in runs],
                     "error": next((r["error"] for r in runs if r["error"]), None),
                     "article": RESET_ARTICLE[variant]})
    result: dict[str, object] = {
        "experiment": "reset-cost", "rows": rows,
        "article": "0.33 ms leaking, 0.35 ms local; reset without autocommit 8.9 ms and 301 connections "
                   "for 300 jobs; DISCARD ALL fails at job 7 in both runs",
        "note": f"two series; medians leave out the first {skip} jobs ({slow_skip} for reset-no-autocommit)"}
    if ctx.plot_dir is not None:
        def draw(ax):
            for variant, runs in series.items():
                t = runs[0]["times"]
                if t:
                    ax.plot(range(len(t)), [x * 1000 for x in t], label=variant, linewidth=0.6)
            ax.set_yscale("log")
            ax.set_xlabel("job (after the warm-up, series 1)")
            ax.set_ylabel("ms per job")
            ax.set_title("Cost of one job per tenant mode")
            ax.legend()
        result["plots"] = [plot(ctx.plot_dir / "reset-cost.png", draw)]
    return result
