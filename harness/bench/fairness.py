"""``run.py bench``'s fairness figures: what the fair designs cost per job beside ``lease``'s FIFO claim.

* **per job** (``harness/bench/cost.py``): latency and transactions per job of ``lease``,
  ``lease-round-robin`` and ``lease-tenant-cap``, one worker, fault-free jobs of zero duration spread
  over the dataset's 100 tenants;
* **per claim**: the claim alone (the design's own ``claim``, timed; then ``lease``'s finish, not timed)
  on one connection, over jobs in the first 100 tenants, with the tenants table at the dataset's 100
  rows and grown to 10,000 for this measurement only (:func:`grown_tenants`; the dataset keeps its
  100). ``lease-round-robin`` probes every tenant between its turn and the next one with work, so its
  claim grows with the tenants that have none; the FIFO and the capped claims do not read the table;
* **per claim behind done jobs**: one tenant's flood of 10,000 jobs (then 20 of a small tenant's), the
  first 9,000 done, as a draining flood leaves them; each claimed job is put back (untimed), so every
  claim sees the same queue. ``lease``'s ``order by id`` walks the primary key over the done rows; the
  fair claims probe their partial index of queued and running jobs.

Printed, never asserted: the machine is shared.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

from ...core import sqlfile
from ...core.db import one
from ...core.errors import HarnessError
from ...core.schedule import JobSpec, Schedule
from ...workers import QueueDesign, load_design
from ...workers.body.context import WorkerContext
from ...workers.body.execution import WorkerSpec
from ...workers.builtin.lease import Q as LEASE
from .cost import design_cost

Q = sqlfile.load(__file__, "fairness.sql", "grow_tenants", "analyze_tenants", "empty_queue", "shrink_tenants",
                 "tenant_count", "mark_done", "requeue")

FAIR_DESIGNS = ("lease", "lease-round-robin", "lease-tenant-cap")  # FIFO first, as the article claims
TENANT_COUNTS = (100, 10_000)
BUSY_TENANTS = 100  # the tenants with work: the dataset's


@contextlib.contextmanager
def grown_tenants(admin: psycopg.Connection, tenants: int):
    """The tenants table at *tenants* rows for the block, then back to the dataset's 100 (and the queue
    emptied, so no job refers to a removed tenant). Hazard: nothing else may run on the database."""
    if tenants > BUSY_TENANTS:
        with admin.transaction():
            admin.execute(Q.grow_tenants, {"tenants": tenants})
            admin.execute(Q.analyze_tenants)
    try:
        yield
    finally:
        if tenants > BUSY_TENANTS:
            with admin.transaction():
                admin.execute(Q.empty_queue)
                admin.execute(Q.shrink_tenants)
                admin.execute(Q.analyze_tenants)


def claim_ms(runner, worker_dsn: str, design_name: str, claims: int, *, time_scale: float) -> list[float]:
    """Milliseconds per claim of *design_name* over *claims* queued jobs in the first 100 tenants: the
    design's own ``claim`` on one connection, each claimed job then finished with ``lease``'s finish
    (untimed), as a worker would before its next claim."""
    handle = load_design(design_name)
    sched = Schedule(jobs=tuple(JobSpec(i, tenant=(i % BUSY_TENANTS) + 1, duration=0.0)
                                for i in range(1, claims + 1)),
                     workers=1, design=design_name, time_scale=time_scale)
    design = handle.design
    if not isinstance(design, QueueDesign):  # FAIR_DESIGNS are built-in designs
        raise HarnessError(f"claim_ms: {design_name} is not a built-in design")
    runner.prepare(sched, handle)
    times = []
    with tempfile.TemporaryDirectory(prefix="pgjc-claim-") as run_dir, \
            psycopg.connect(worker_dsn) as conn:
        ctx = WorkerContext(WorkerSpec("bench-claim", sched, worker_dsn, Path(run_dir)))
        claim = design.claim
        for _ in range(claims):
            t0 = time.perf_counter()
            job = claim(ctx, conn)
            times.append((time.perf_counter() - t0) * 1000)
            if job is None:
                break
            conn.execute(LEASE.finish, {"id": job.id})
            conn.commit()
        ctx.close()
    return times


def claim_behind_done_ms(runner, worker_dsn: str, design_name: str, done: int, *, repeats: int,
                         time_scale: float) -> float:
    """Median milliseconds of *design_name*'s claim statement(s) with the queue's first *done* of 10,000
    flood jobs done; each claimed job is put back as it was (untimed) before the next claim."""
    handle = load_design(design_name)
    design = handle.design
    if not isinstance(design, QueueDesign):
        raise HarnessError(f"claim_behind_done_ms: {design_name} is not a built-in design")
    jobs = (*(JobSpec(i, tenant=1, duration=0.0) for i in range(1, 10_001)),
            *(JobSpec(10_000 + i, tenant=100, duration=0.0) for i in range(1, 21)))
    sched = Schedule(jobs=jobs, workers=1, design=design_name, time_scale=time_scale)
    runner.prepare(sched, handle)
    with runner.admin.transaction():
        runner.admin.execute(Q.mark_done, {"done": done})
    times = []
    with tempfile.TemporaryDirectory(prefix="pgjc-claim-") as run_dir, \
            psycopg.connect(worker_dsn) as conn:
        ctx = WorkerContext(WorkerSpec("bench-claim", sched, worker_dsn, Path(run_dir)))
        for _ in range(repeats):
            t0 = time.perf_counter()
            job = design.claim(ctx, conn)
            times.append((time.perf_counter() - t0) * 1000)
            if job is not None:
                with runner.admin.transaction():
                    runner.admin.execute(Q.requeue, {"id": job.id})
        ctx.close()
    return statistics.median(times)


def figures(runner, database, out, *, quick: bool, time_scale: float) -> None:
    """Print the per-job and the per-claim figures (see the module's docstring)."""
    jobs = 100 if quick else 500
    print(f"\nfairness: per job, fault-free, no supervisor ({jobs} jobs in 100 tenants, 1 worker):", file=out)
    for design in FAIR_DESIGNS:
        c = design_cost(runner, database.admin_dsn, database.worker_dsn, design, jobs=jobs,
                        time_scale=time_scale)
        print(f"  {design:<18} latency {c['latency_ms']:.2f} ms per job (one execution, median "
              f"{c['execution_ms']:.2f} ms), {c['transactions']:.2f} transactions per job", file=out)
    claims = 200 if quick else 1000
    print(f"fairness: per claim ({claims} jobs in the first 100 tenants, one connection; "
          "median / mean / max ms):", file=out)
    for tenants in TENANT_COUNTS:
        with grown_tenants(runner.admin, tenants):
            rows = one(runner.admin.execute(Q.tenant_count))[0]
            cells = []
            for design in FAIR_DESIGNS:
                ms = sorted(claim_ms(runner, database.worker_dsn, design, claims, time_scale=time_scale))
                cells.append(f"{design} {statistics.median(ms):.3f} / {statistics.fmean(ms):.3f} / "
                             f"{ms[-1]:.2f}")
        print(f"  tenants table {rows:>6} rows: " + "; ".join(cells), file=out)
    repeats = 20 if quick else 100
    print(f"fairness: per claim behind a draining flood (10,000 jobs of one tenant; median of {repeats}):",
          file=out)
    for done in (0, 9_000):
        ms = [claim_behind_done_ms(runner, database.worker_dsn, d, done, repeats=repeats,
                                   time_scale=time_scale) for d in FAIR_DESIGNS]
        cells = [f"{d} {m:.3f} ms" for d, m in zip(FAIR_DESIGNS, ms, strict=True)]
        print(f"  {done:>5} done ahead: " + "; ".join(cells), file=out)
