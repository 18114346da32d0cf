"""Fairness between tenants (issue 38): the starvation bound, judged from when each job started.

``starvation-bound`` holds when no tenant's job waited (enqueue -> first start, ``core/waits.py``) longer
than it would if the bodies running had been shared equally among the tenants with work queued.

**The bound, per job j of tenant T**, is stated in *work* rather than wall time. Under equal sharing
(generalised processor sharing) every tenant with work queued is served at the same rate, whatever the
number of bodies running, so while j waits no other tenant can be given more work than T itself needs up
to j: ``A_j``, the work of T's jobs ahead of j in queue order and of j itself. A body cannot be split,
and at any moment each body running may just have taken another tenant's job: one job per body running
more. So j waited too long when, for some other tenant U, the work of U's jobs that started while j
waited, ``X_U``, exceeds::

    SLACK * A_j + W_j * L_U

**and** U was given more turns than its share: more than ``SLACK * K_j + W_j`` of its jobs started,
``K_j`` being T's jobs ahead of j and j itself. A design fair in either measure passes: in work (a
deficit round-robin, processor sharing) or in turns (a round-robin claim, one job of each tenant in turn,
whose tenant with longer jobs is given more work per turn: measured, lease-round-robin under a flood of
jobs 4x longer gave the hot tenant 0.32 s of work where work alone allowed 0.29 s). FIFO under a flood
exceeds both. ``SLACK`` = 2 (a round-robin claim keeps well inside it), ``W_j`` the most bodies running
at once during the wait (:func:`~core.waits.bodies_running`: the history's executions, counted as
``core/overlap.py`` counts ``bodies_at_once``, whichever process runs them) and ``L_U`` the largest work
of one of U's jobs. A job's work is its scheduled duration (time-scaled), plus what the body adds to
it (the median, over the fault-free jobs, of their first execution's length less their scheduled
duration), plus the per-job claim-and-finish cost ``c`` (the median gap between two executions of one
worker); a job carrying a fault counts its first execution's measured length instead of the first two (a
hang holds its worker as long as it hangs). Counting work, not seconds, makes the verdict immune to a
loaded machine's hiccups, which stretch every wait alike: the search's shrinking ends on a flood that
fails every time, not on a run a hiccup failed once (seconds, as first built, left 3 of 3 seeded searches
flaky). The evidence gives the seconds: the wait, and the fair wait ``F_j`` -- when the fluid share
``integral of W(t)/n(t)`` from the enqueue reaches ``A_j``, with ``W(t)`` the bodies running and ``n(t)``
the tenants with work queued as the run had them (:func:`fair_finishes`).

**Why bodies, not processes** (issue 46). ``W_j`` first counted the live worker *processes*: a hosted
library running 10 or 50 jobs in one process was then held to the bound of one worker, and failed it at
its default concurrency whatever its tenant separation (every job of a batch started within a fraction of
a second, yet all but one counted as overtaking). Counting the bodies that *did* run at once gives each
body its one job of slack, as it gives each single-job process. It is measured, never the concurrency a
design declares: DBOS's and pgqueuer's declared "no limit" would make the bound vacuous. A design that
runs one body per process has at most as many bodies running as live processes, so its bound is the same
or tighter (a live worker that runs no body -- idle, or held back by a cap -- no longer counts).

Judged only under a declared tenant workload (``Schedule.workload``, ``--workload flood``): without one
it is left out of the run's table (``properties.check``), and its group ``fairness`` is outside the
default gate (``properties.gate``), so the FIFO designs, which hand a flood out first by design, keep
passing the default searches.

**Faults.** ``bounded-blast-radius`` counts the worker *processes* one poison job kills; this bound
counts the *service* other tenants lose. A crash loop lowers the bodies running: it is judged by the
blast radius, and here only the jobs that *started* count, so restarts are not charged as unfairness.
A hang or an overrun holds a body for its measured length: a design that lets one tenant's hung jobs take
every worker while another tenant's job waits violates the bound for that tenant.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict

from ..core.history import History
from ..core.waits import JobWait, Steps, backlogged, bodies_running, job_waits
from .checks import plural
from .core import Mark, Result, decides, held, not_judged, violated

SLACK = 2.0  # times the tenant's own work up to the job (the module docstring)


def _lengths_and_cost(h: History) -> tuple[dict[int, float], float]:
    """Per job its first execution's length, and the per-job cost ``c``."""
    first: dict[int, float] = {}
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for ex in h.executions():
        end = ex.end if ex.end is not None else h.t1
        first.setdefault(ex.job, end - ex.start)
        by_worker.setdefault(ex.worker, []).append((ex.start, end))
    gaps = [b[0] - a[1] for spans in by_worker.values()
            for a, b in zip(spans, spans[1:], strict=False) if b[0] >= a[1]]
    return first, statistics.median(gaps) if gaps else 0.0


def work(h: History) -> dict[int, float]:
    """Per job, its work in seconds (the module docstring)."""
    first, cost = _lengths_and_cost(h)
    faults = h.job_faults()
    # what the body adds to a job's scheduled work (its statements, the tenant's invoices read): one median,
    # so that the verdict keeps to the queue's order and not to each execution's noise
    extra = [first[j.id] - h.schedule.seconds(j.duration) for j in h.schedule.jobs
             if j.id in first and j.id not in faults]
    body = max(0.0, statistics.median(extra)) if extra else 0.0
    return {j.id: (first[j.id] if j.id in faults and j.id in first
                   else h.schedule.seconds(j.duration) + body) + cost for j in h.schedule.jobs}


def fair_finishes(h: History) -> dict[int, float | None]:
    """Per job, its fluid fair finish ``F_j`` in seconds after its enqueue (None: beyond the run's end)."""
    waits = job_waits(h)
    running = bodies_running(h)
    queued = backlogged(waits, h.t1)
    times = sorted({h.t0, h.t1, *running.times, *queued.times})
    times = [t for t in times if h.t0 <= t <= h.t1]
    cum = [0.0]  # the integral of W/n from t0 to times[k]
    for a, b in zip(times, times[1:], strict=False):
        cum.append(cum[-1] + (b - a) * running.at(a) / max(1, queued.at(a)))
    size = work(h)
    own: dict[int | None, float] = defaultdict(float)
    out: dict[int, float | None] = {}
    for w in waits:
        own[w.tenant] += size[w.job]
        out[w.job] = _invert(times, cum, h, w.enqueued, own[w.tenant])
    return out


def _invert(times: list[float], cum: list[float], h: History, start: float, work: float) -> float | None:
    """The seconds after *start* at which the integral reaches *work* more than at *start*."""
    def integral(t: float) -> float:
        k = max(0, bisect.bisect_right(times, t) - 1)
        rate = (cum[k + 1] - cum[k]) / (times[k + 1] - times[k]) if k + 1 < len(times) else 0.0
        return cum[k] + rate * (t - times[k])

    goal = integral(start) + work
    k = bisect.bisect_left(cum, goal)
    if k >= len(cum):
        return None
    if k == 0:
        return 0.0
    span = cum[k] - cum[k - 1]
    t = times[k - 1] + (times[k] - times[k - 1]) * ((goal - cum[k - 1]) / span if span else 1.0)
    return max(0.0, t - start)


def most_during(steps: Steps, start: float, until: float) -> int:
    """The largest value *steps* takes from *start* up to (not including) *until*: ``W_j`` of a wait."""
    return max([steps.at(start)] + [v for t, v in zip(steps.times, steps.values, strict=True)
                                    if start <= t < until])


def overserved(h: History) -> dict[int, tuple[int | None, float, float, int, int]]:
    """Per job that waited too long: (the other tenant served most, the work it was given while the job
    waited, what the bound allowed it, how many of its jobs started meanwhile, how many turns the bound
    allowed it) (the module docstring)."""
    waits = job_waits(h)
    size = work(h)
    running = bodies_running(h)
    own: dict[int | None, float] = defaultdict(float)
    turns: dict[int | None, int] = defaultdict(int)  # the tenant's jobs up to and including this one
    longest: dict[int | None, float] = defaultdict(float)
    for w in waits:
        longest[w.tenant] = max(longest[w.tenant], size[w.job])
    out = {}
    for w in waits:
        own[w.tenant] += size[w.job]
        turns[w.tenant] += 1
        until = w.started if w.started is not None else h.t1
        others = [x for x in waits if x.tenant != w.tenant and x.started is not None
                  and w.enqueued <= x.started < until]
        given: dict[int | None, float] = defaultdict(float)
        for x in others:
            given[x.tenant] += size[x.job]
        workers = most_during(running, w.enqueued, until)  # W_j
        ran: dict[int | None, int] = defaultdict(int)
        for x in others:
            ran[x.tenant] += 1
        # over its share in work AND in turns (the module docstring: fair in either passes)
        over = [(g - (SLACK * own[w.tenant] + workers * longest[u]), u) for u, g in given.items()
                if ran[u] > SLACK * turns[w.tenant] + workers]
        if over and max(over, key=lambda o: o[0])[0] > 1e-9:
            u = max(over, key=lambda o: o[0])[1]
            out[w.job] = (u, given[u], SLACK * own[w.tenant] + workers * longest[u], ran[u],
                          int(SLACK * turns[w.tenant] + workers))
    return out


def _waited(h: History, w: JobWait, hot: int | None, ran: int) -> Mark:
    """The event starvation-bound names: the starved job's wait, a span from its enqueue to its first start
    (to the run's end, when it never started), on the worker that started it."""
    first = min((e for e in h.executions() if e.job == w.job), key=lambda e: e.start, default=None)
    t = w.started if w.started is not None else h.t1
    waited = "waited" if w.started is not None else "never started in"
    return Mark(t, "wait", first.worker if first else "", w.job,
                f"tenant {w.tenant}'s job {w.job} {waited} {w.wait:.2f} s while tenant {hot} ran "
                f"{plural(ran, 'job')}",
                attempt=first.attempt if first else None, since=w.enqueued)


@decides("starvation-bound", group="fairness", position=30)
def starvation_bound(h: History, name: str) -> Result:
    """Violated by every job while whose wait another tenant was given more work than its bound (the
    module docstring), the most overserved first. Count: jobs."""
    if h.schedule.workload is None:
        return not_judged(name, "no tenant workload declared (--workload flood)")
    waits = {w.job: w for w in job_waits(h)}
    found = overserved(h)
    fair = fair_finishes(h)
    lines = []
    jobs = []
    for job, (u, given, allowed, ran, turns) in sorted(found.items(), key=lambda kv: kv[1][2] - kv[1][1]):
        w = waits[job]
        waited = "waited" if w.started is not None else "never started in"
        f = fair[job]
        lines.append(f"tenant {w.tenant}'s job {job} {waited} {w.wait:.2f} s while tenant {u} ran "
                     f"{plural(ran, 'job')} ({given:.2f} s of work; equal sharing allows {allowed:.2f} s, "
                     f"or {turns} turns)"
                     + (f"; the fair wait was {f:.2f} s" if f is not None else ""))
        jobs.append(job)
    if lines:
        hot, _, _, ran, _ = found[jobs[0]]
        return violated(name, lines, jobs, event=_waited(h, waits[jobs[0]], hot, ran))
    return held(name, f"while each of {plural(len(waits), 'job')} waited, no other tenant was given more "
                      "work or more turns than equal sharing allows")
