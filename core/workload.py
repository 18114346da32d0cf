"""A tenant workload (issue 38): tenants that differ, in a few parameters that shrink.

A schedule that declares one (``Schedule.workload``) holds its jobs like any other (ids 1.. in queue
order, ``core.schedule.workload_jobs``) and saves only the parameters and the jobs they do not give, so
a flood of a thousand jobs is eight numbers in a saved file, and Hypothesis shrinks the numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

WORKLOADS = ("flood",)
# Where the hot tenant's flood goes in the queue (ids follow queue order), simplest first: ahead of the
# others (what an import or a backfill enqueued first does), after them, or one job of each tenant in turn.
ORDERS = ("hot-first", "hot-last", "interleaved")
SMALLEST_TENANT = 100  # the dataset's tenants are 1..100; tenant t owns floor(20000 / t) invoices


@dataclass(frozen=True)
class Workload:
    """A *hot* tenant's flood of ``hot_jobs`` jobs and ``small_tenants`` small tenants with ``small_jobs``
    jobs each, in ``order``, each job working ``hot_duration`` / ``small_duration`` article seconds. The
    small tenants are the dataset's smallest, 100, 99, ... (200 invoices each; the hot tenant 1 has
    20,000): the body reads its tenant's invoices, so a hot job reads a hundred times the rows. Every job
    is enqueued before the workers start, in one transaction (the runner's enqueue)."""

    kind: str = "flood"
    hot_tenant: int = 1
    hot_jobs: int = 20
    small_tenants: int = 1
    small_jobs: int = 1
    order: str = "hot-first"
    hot_duration: float = 0.05
    small_duration: float = 0.05

    def tenants(self) -> list[int]:
        """The small tenants: the dataset's smallest first, never the hot one."""
        return [t for t in range(SMALLEST_TENANT, 0, -1) if t != self.hot_tenant][:self.small_tenants]

    def queue(self) -> list[tuple[int, float]]:
        """(tenant, duration) of every job, in queue order."""
        hot = [(self.hot_tenant, self.hot_duration)] * self.hot_jobs
        rounds = [[(t, self.small_duration) for t in self.tenants()] for _ in range(self.small_jobs)]
        small = [x for r in rounds for x in r]  # the small tenants' jobs, one of each in turn
        if self.order == "hot-last":
            return small + hot
        if self.order == "interleaved":  # the flood's i-th job, then every small tenant's i-th
            out: list[tuple[int, float]] = []
            for i in range(max(self.hot_jobs, self.small_jobs)):
                out += hot[i:i + 1] + (rounds[i] if i < len(rounds) else [])
            return out
        return hot + small

    def check(self, bad: Callable[[str], None]) -> None:
        """Call ``bad("workload...: message")`` for the first thing wrong."""
        if self.kind not in WORKLOADS:
            bad(f"workload.kind: unknown workload {self.kind!r}; workloads: {', '.join(WORKLOADS)}")
        if self.order not in ORDERS:
            bad(f"workload.order: {self.order!r}; orders: {', '.join(ORDERS)}")
        if not 1 <= self.hot_tenant <= SMALLEST_TENANT:
            bad("workload.hot_tenant: tenants are 1..100")
        if self.hot_jobs < 0 or self.small_jobs < 0 or not 0 <= self.small_tenants < SMALLEST_TENANT:
            bad("workload: hot_jobs and small_jobs at least 0, small_tenants 0..99")
        if self.hot_duration < 0 or self.small_duration < 0:
            bad("workload: durations must be >= 0")
