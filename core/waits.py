"""Waiting, per job and per tenant (issue 38): enqueue -> first start, from a history.

Figures, not verdicts (``properties/fairness.py`` judges the starvation bound from the same figures):

- a job's **wait** is from its enqueue to the start of its first execution (the execution log's
  ``started``); every job of a schedule is enqueued, in one transaction, before the supervisor forks the
  workers, so its enqueue time is the run's start ``History.t0``. A job that never started waited until
  the run's end (``started`` None: a censored wait, at least that long);
- **live workers** over time: a worker identity is live from its first record (connected and working;
  before it the fork and the connection, which no design can hand to a tenant) to its exit;
- **bodies running** over time: the executions alive at each moment, whichever process runs them (a hosted
  library runs several in one), each from its ``started`` record to its end (``core/overlap.py`` counts the
  most of them at once the same way: an end at t before a start at t);
- **backlogged tenants** over time: the tenants with a job enqueued and not yet started;
- **Jain's index of service** (Jain, Chiu & Hawe 1984): over *work-seconds* (the time the tenant's
  executions ran, clipped to the window) per tenant, in the window in which every tenant of the run was
  backlogged (from the start until the first tenant's last job started); 1 is equal service, 1/n all to
  one tenant. None when fewer than two tenants, or the window is shorter than one job's work;
- **behind the hot one**: the longest wait of a job not of the run's hottest tenant (the most jobs), with
  how many of the hot tenant's jobs started while it waited.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TypedDict

from .history import History


@dataclass(frozen=True)
class JobWait:
    job: int
    tenant: int | None
    enqueued: float  # monotonic seconds, the history's clock
    started: float | None  # its first execution's start; None: never started
    wait: float  # seconds; a job never started: until the run's end (a lower bound)


def job_waits(h: History) -> list[JobWait]:
    """Every job's wait, in queue order (the schedule's)."""
    first: dict[int, float] = {}
    for ex in h.executions():
        if ex.job not in first or ex.start < first[ex.job]:
            first[ex.job] = ex.start
    out = []
    for j in h.schedule.jobs:
        s = first.get(j.id)
        out.append(JobWait(j.id, j.tenant, h.t0, s, max(0.0, (s if s is not None else h.t1) - h.t0)))
    return out


def tenants(waits: list[JobWait]) -> list[int]:
    """The tenants with jobs (a system job's None left out), most jobs first, then by number."""
    counts = Counter(w.tenant for w in waits if w.tenant is not None)
    return sorted(counts, key=lambda t: (-counts[t], t))


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank *q*-th percentile (0 < q <= 100) of *values*; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def jain(xs: list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one has it all;
    None for an empty list or all zero."""
    sq = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * sq) if xs and sq > 0 else None


class Steps:
    """A step function of time from (time, +1/-1) changes; ``at(t)`` is its value just after *t*."""

    def __init__(self, changes: list[tuple[float, int]]):
        self.times: list[float] = []
        self.values: list[int] = []
        level = 0
        for t, d in sorted(changes):
            level += d
            if self.times and self.times[-1] == t:
                self.values[-1] = level
            else:
                self.times.append(t)
                self.values.append(level)

    def at(self, t: float) -> int:
        i = bisect.bisect_right(self.times, t) - 1
        return self.values[i] if i >= 0 else 0


def live_workers(h: History) -> Steps:
    """Live workers over time (the module docstring)."""
    begin: dict[str, float] = {}
    for r in h.records:
        w = r.get("worker")
        if isinstance(w, str) and (w not in begin or r["t"] < begin[w]):
            begin[w] = r["t"]
    end = {x.worker: x.t for x in h.exits}
    return Steps([c for w, t in begin.items() for c in ((t, 1), (max(t, end.get(w, h.t1)), -1))])


def bodies_running(h: History) -> Steps:
    """Bodies running over time (the module docstring): +1 at each execution's start, -1 at its end."""
    return Steps([c for ex in h.executions()
                  for c in ((ex.start, 1), (max(ex.start, ex.end if ex.end is not None else h.t1), -1))])


def backlogged(waits: list[JobWait], t1: float) -> Steps:
    """Tenants with a job enqueued and not yet started, over time."""
    spans: dict[int | None, list[tuple[float, float]]] = defaultdict(list)
    for w in waits:
        spans[w.tenant].append((w.enqueued, w.started if w.started is not None else t1))
    changes = []
    for intervals in spans.values():  # a tenant counts once, however many jobs it has queued
        for a, b in _union(intervals):
            changes += [(a, 1), (b, -1)]
    return Steps(changes)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


class TenantFigures(TypedDict):
    """One tenant's waits (:func:`tenant_figures`)."""

    jobs: int
    p50: float | None
    p99: float | None
    max: float
    never_started: int


def tenant_figures(waits: list[JobWait]) -> dict[int, TenantFigures]:
    """Per tenant: jobs, p50/p99/max wait (seconds; a job never started counts its censored wait) and
    how many never started."""
    out: dict[int, TenantFigures] = {}
    for t in tenants(waits):
        mine = [w.wait for w in waits if w.tenant == t]
        out[t] = {"jobs": len(mine), "p50": percentile(mine, 50), "p99": percentile(mine, 99),
                  "max": max(mine), "never_started": sum(w.started is None for w in waits if w.tenant == t)}
    return out


def service_jain(h: History, waits: list[JobWait]) -> tuple[float | None, float]:
    """Jain's index of work-seconds per tenant while every tenant was backlogged, and that window's
    length in seconds (the module docstring)."""
    names = tenants(waits)
    if len(names) < 2:
        return None, 0.0
    last = {t: max((w.started if w.started is not None else h.t1) for w in waits if w.tenant == t)
            for t in names}
    end = min(last.values())
    work: dict[int, float] = dict.fromkeys(names, 0.0)
    longest = 0.0
    for ex in h.executions():
        stop = ex.end if ex.end is not None else h.t1
        longest = max(longest, stop - ex.start)
        if ex.tenant in work:
            work[ex.tenant] += max(0.0, min(stop, end) - max(ex.start, h.t0))
    window = end - h.t0
    if window <= 0 or window < longest:
        return None, max(window, 0.0)
    return jain(list(work.values())), window


def behind_hot(waits: list[JobWait], t1: float) -> dict[str, object] | None:
    """The longest wait of a job not of the hottest tenant, and the hot tenant's jobs started during it."""
    names = tenants(waits)
    if len(names) < 2:
        return None
    hot = names[0]
    others = [w for w in waits if w.tenant != hot]
    if not others:
        return None
    worst = max(others, key=lambda w: w.wait)
    until = worst.started if worst.started is not None else t1
    ran = sum(1 for w in waits if w.tenant == hot and w.started is not None
              and worst.enqueued <= w.started <= until)
    return {"job": worst.job, "tenant": worst.tenant, "wait": worst.wait, "hot_tenant": hot,
            "hot_jobs_started": ran, "started": worst.started is not None}


def summary(h: History) -> dict[str, object] | None:
    """The figures of one run with more than one tenant, as JSON data (seconds; ``series``: per tenant,
    [seconds since the start at which the job started, its wait]); None with fewer than two tenants."""
    waits = job_waits(h)
    if len(tenants(waits)) < 2:
        return None
    index, window = service_jain(h, waits)
    series: dict[str, list[list[float]]] = defaultdict(list)
    for w in waits:
        if w.tenant is not None:
            at = (w.started if w.started is not None else h.t1) - h.t0
            series[str(w.tenant)].append([round(at, 4), round(w.wait, 4)])
    return {"tenants": {str(t): {k: (round(v, 4) if isinstance(v, float) else v) for k, v in f.items()}
                        for t, f in tenant_figures(waits).items()},
            "jain": None if index is None else round(index, 4), "jain_of": "work-seconds",
            "jain_window": round(window, 4), "behind_hot": behind_hot(waits, h.t1), "series": dict(series)}
