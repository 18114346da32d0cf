"""``lease-round-robin`` and ``lease-tenant-cap``: ``lease``'s claim made fair between tenants.

Both keep everything of ``lease`` but the choice of the next job: the claim still commits
``running``, ``attempts + 1`` and ``locked_until`` before any work starts, with ``for update skip
locked``; the work transaction, the unfenced finish and the failure path are ``lease``'s own. So they
keep what ``lease`` keeps, and lose what it loses (overrun: two executions, both finish).

* ``lease-round-robin``: one tenant at a time in turn. A one-row table, ``pgjc.tenant_turn``, holds
  the tenant served last; each claim locks it, takes the oldest claimable job of the next tenant (in
  id order, wrapping round) that has one, and moves the turn there. Under a flood every tenant with
  work gets one job per lap. The cost: claims serialize on the turn row, and a claim probes every
  tenant between the turn and the next one with work -- up to the whole tenants table.
* ``lease-tenant-cap``: at most ``cap`` live leases per tenant (``--design-option cap=N``, default
  1). The oldest claimable job among the tenants under their cap (one probe per tenant) is claimed,
  under a per-tenant advisory lock held to the claim's commit, so two workers cannot both take a
  tenant's last slot. The cap is
  on leases held: a job that outlives its lease is claimable again, and its late execution runs
  beside the new one (as in ``lease``). Workers stay idle rather than exceed it.

A job without a tenant is tenant key 0 in both: served in its own turn, capped like a tenant.
"""

from __future__ import annotations

from psycopg import sql

from ...core import sqlfile
from ...core.errors import UsageError
from ..body.execution import Claimed
from .lease import Lease

Q = sqlfile.load(__file__, "fair.sql", "create_turn", "create_queue_index", "create_running_index",
                 "create_views", "grant_views", "grant_turn", "reset_turn",
                 "claim_round_robin", "cap_candidate", "cap_lock", "cap_claim")

CAP_LOCK_CLASS = 0x6A63  # the advisory lock's first key: "jc"; the second is the tenant key
CAP_TRIES = 3  # candidate tenants tried per claim before the worker polls again


def _install_views(conn, worker_role: str) -> None:
    """The queue index and the views both fair designs' claims read (fair.sql: create_views)."""
    conn.execute(Q.create_queue_index)
    conn.execute(Q.create_views)
    conn.execute(sql.SQL(Q.grant_views).format(worker=sql.Identifier(worker_role)))


class LeaseRoundRobin(Lease):
    name = "lease-round-robin"
    recovery_statements: tuple[str, ...] = ("fair.claim_round_robin",)  # it takes over an expired lease

    def install(self, conn, *, worker_role: str) -> None:
        _install_views(conn, worker_role)
        conn.execute(Q.create_turn)
        conn.execute(sql.SQL(Q.grant_turn).format(worker=sql.Identifier(worker_role)))

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        conn.execute(Q.reset_turn)
        super().enqueue(conn, jobs, max_attempts=max_attempts)

    def claim(self, ctx, conn):
        row = conn.execute(Q.claim_round_robin, {"lease": ctx.lease}).fetchone()
        conn.commit()  # the claim and the turn are durable before any work starts
        if row is None:
            return None
        job_id, tenant, attempts, payload = row
        return Claimed(job_id, tenant, attempts, payload)


class LeaseTenantCap(Lease):
    name = "lease-tenant-cap"
    recovery_statements: tuple[str, ...] = ("fair.cap_claim",)  # its claim takes over an expired lease

    def __init__(self, cap: str | int = 1):
        try:
            self.cap = int(cap)
        except ValueError:
            self.cap = 0
        if self.cap < 1:
            raise UsageError(f"--design-option cap={cap}: expected a whole number of at least 1")
        # Declared for tenant-cap, which judges executions alive, not leases held: an execution that
        # outlives its lease runs beside the one that re-claimed it (the module docstring), over the cap.
        self.tenant_cap = self.cap

    def install(self, conn, *, worker_role: str) -> None:
        _install_views(conn, worker_role)
        conn.execute(Q.create_running_index)

    def claim(self, ctx, conn):
        skip = []  # tenant keys tried in this claim
        for _ in range(CAP_TRIES):
            if ctx.mode.autocommit:
                conn.execute("begin")  # the advisory lock must last to the claim's commit
            row = conn.execute(Q.cap_candidate, {"cap": self.cap, "skip": skip}).fetchone()
            if row is None:
                conn.commit()
                return None
            key = row[0]
            locked = conn.execute(Q.cap_lock, {"lock_class": CAP_LOCK_CLASS, "tenant": key}).fetchone()[0]
            claimed = conn.execute(Q.cap_claim, {"tenant": key, "cap": self.cap, "lease": ctx.lease}
                                   ).fetchone() if locked else None
            conn.commit()  # the claim is durable before any work starts; the tenant's lock is released
            if claimed is not None:
                job_id, tenant, attempts, payload = claimed
                return Claimed(job_id, tenant, attempts, payload)
            skip.append(key)  # another worker is claiming for it, or it reached its cap meanwhile
        return None
