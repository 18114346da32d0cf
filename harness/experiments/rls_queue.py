"""Experiment 8, rls-queue: the tenant policy on the queue table too.

100 jobs, one per tenant, in the shared ``jobs`` table; the policy of ``invoices`` is put on
``jobs`` for the experiment and removed afterwards. A worker with no tenant context counts the
jobs and runs the lease design's own claim (``workers/builtin/lease.sql``), which it would run first.
"""

from __future__ import annotations

import psycopg

from ...core import sqlfile
from ...core.db import one
from ...core.schedule import JobSpec
from ...workers.body.execution import Q as BODY
from ...workers.builtin.lease import Lease
from ...workers.builtin.lease import Q as LEASE
from ..postgres import dataset as db
from .common import Context

Q = sqlfile.load(__file__, "rls_queue.sql", "enable", "disable", "count_jobs")

N_JOBS = 100


def _look(ctx: Context, tenant: int | None) -> dict:
    """What a worker sees: jobs visible, and what the claim returns, in a transaction rolled back."""
    with psycopg.connect(ctx.direct_worker_dsn, application_name="pg-job-chaos/exp-rls") as conn:
        try:
            if tenant is not None:
                conn.execute(BODY.set_tenant, {"tenant": str(tenant), "local": True})
            visible = one(conn.execute(Q.count_jobs))[0]
            row = conn.execute(LEASE.claim, {"lease": 1.0}).fetchone()
            error = None
        except psycopg.Error as exc:
            visible = None
            row = None
            error = str(exc).strip().splitlines()[0]
        finally:
            conn.rollback()
    return {"jobs_visible": f"{visible} of {N_JOBS}" if visible is not None else None,
            "claim_returned": f"job {row[0]} (tenant {row[1]})" if row else "nothing",
            "error": error or "none"}


def rls_queue(ctx: Context) -> dict:
    rows = []
    with psycopg.connect(ctx.database.admin_dsn, autocommit=True) as admin:
        db.reset(admin)
        with admin.transaction():
            Lease().enqueue(admin, [JobSpec(t, tenant=t) for t in range(1, N_JOBS + 1)], max_attempts=3)
        rows.append({"policy_on_jobs": False, "tenant_context": "none", **_look(ctx, None),
                     "article": "(the default: the worker sees every job)"})
        try:
            with admin.transaction():
                admin.execute(Q.enable)
            rows.append({"policy_on_jobs": True, "tenant_context": "none", **_look(ctx, None),
                         "article": "0 of 100 jobs; the claim returned nothing, no error"})
            rows.append({"policy_on_jobs": True, "tenant_context": "tenant 42", **_look(ctx, 42),
                         "article": "(not measured: only its own tenant's jobs)"})
        finally:
            with admin.transaction():
                admin.execute(Q.disable)
            db.reset(admin)
    return {"experiment": "rls-queue", "rows": rows,
            "article": "with the tenant policy on jobs, a worker without a tenant context saw 0 of 100 jobs "
                       "and the claim returned nothing: no error, an apparently empty queue"}
