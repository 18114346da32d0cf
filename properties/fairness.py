"""Fairness between tenants (issue 38): the starvation bound, judged from when each job started.

``starvation-bound`` holds when no tenant's job waited (enqueue -> first start, ``core/waits.py``) longer
than it would if the *live* workers had been shared equally among the tenants with work queued.

**The bound, per job j of tenant T.** Let ``W(t)`` be the live workers and ``n(t)`` the tenants with a
job queued (at least 1: T's own, while j waits), both as the run had them. Equal sharing gives T the rate
``W(t)/n(t)`` workers; T's own work up to and including j, ``A_j`` (each of T's jobs ahead of j in queue
order and j itself: its first execution's measured length, or its scheduled duration when it never ran,
plus the per-job claim-and-finish cost ``c``: the median gap between two executions of one worker), is
done under that sharing at ``F_j``, the first time with ``integral from e_j to F_j of W/n >= A_j``
(generalised processor sharing; e_j the enqueue). A non-preemptive scheduler cannot split a worker: by
Parekh and Gallager's bound for packet fair queueing a job starts no later than its fluid finish plus
one job's length. So::

    bound_j = SLACK * (F_j - e_j) + L + 2 * poll + JITTER

with ``SLACK`` = 2 (the claim costs and the job lengths vary; a round-robin claim keeps well inside),
``L`` the longest execution of a job that carries no fault (a worker frees up within one), ``poll``
the schedule's poll interval (a worker that found nothing sleeps one) and ``JITTER`` = 0.2 real seconds,
a scheduler hiccup of a loaded machine (``harness/scales.py`` budgets a lease of 0.2 s against one of the
same size): without it the search's shrinking, which seeks the smallest flood that still fails, ends on
a run that a hiccup failed once and its replay does not. ``n(t)`` is the contention the run
*had*, which is no less than a fair design would have had (an unfair one keeps small tenants queued
longer): the bound favours the design judged, so a violation is a finding.

A job that never started is judged on its censored wait (the run's end). One whose fair finish lies
beyond the run's end is within its bound if it started (it waited less than the run lasted), and cannot
be judged if it never did (no live worker left to give its tenant the share): unknown, when nothing is
violated.

Judged only under a declared tenant workload (``Schedule.workload``, ``--workload flood``): without one
it is not judged, and its group ``fairness`` is outside the default gate (``properties.gate``), so the
FIFO designs, which hand a flood out first by design, keep passing the default searches.

**Faults.** ``bounded-blast-radius`` counts the worker *processes* one poison job kills; this bound
counts the *time* other tenants lose. A crash loop lowers ``W``: the bound is computed with the workers
actually alive, so the restarts' cost is the blast radius's business, not charged here as unfairness.
A hang or an overrun holds a live worker: it counts in ``W`` and its job is no fault-free job for ``L``,
so a design that lets one tenant's hung jobs take every worker violates the bound for the others.
A hosted library running several jobs per worker process is counted one worker per process: the bound
is then looser (it favours the design).
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter, defaultdict

from ..core.history import History
from ..core.waits import backlogged, job_waits, live_workers
from .checks import plural
from .core import Result, decides, held, not_judged, unknown, violated

SLACK = 2.0  # times the fair-share wait (the module docstring)
POLLS = 2  # poll intervals of grace
JITTER = 0.2  # real seconds: a scheduler hiccup on a loaded machine (the module docstring)


def _cost_and_length(h: History) -> tuple[dict[int, float], float, float]:
    """Per job its first execution's length, the per-job cost ``c`` and the longest fault-free job."""
    first: dict[int, float] = {}
    by_worker: dict[str, list[tuple[float, float]]] = {}
    longest = 0.0
    faults = h.job_faults()
    for ex in h.executions():
        end = ex.end if ex.end is not None else h.t1
        if ex.job not in first:
            first[ex.job] = end - ex.start
        by_worker.setdefault(ex.worker, []).append((ex.start, end))
        if ex.job not in faults and ex.outcome == "ok":
            longest = max(longest, end - ex.start)
    gaps = [b[0] - a[1] for spans in by_worker.values()
            for a, b in zip(spans, spans[1:], strict=False) if b[0] >= a[1]]
    return first, statistics.median(gaps) if gaps else 0.0, longest


def fair_finishes(h: History) -> dict[int, float | None]:
    """Per job, its fluid fair finish ``F_j`` in seconds after its enqueue (None: beyond the run's end)."""
    waits = job_waits(h)
    live, queued = live_workers(h), backlogged(waits, h.t1)
    times = sorted({h.t0, h.t1, *live.times, *queued.times})
    times = [t for t in times if h.t0 <= t <= h.t1]
    cum = [0.0]  # the integral of W/n from t0 to times[k]
    for a, b in zip(times, times[1:], strict=False):
        cum.append(cum[-1] + (b - a) * live.at(a) / max(1, queued.at(a)))
    first, cost, _ = _cost_and_length(h)
    own: dict[int | None, float] = defaultdict(float)
    out: dict[int, float | None] = {}
    for w, spec in zip(waits, h.schedule.jobs, strict=True):
        own[w.tenant] += first.get(w.job, h.schedule.seconds(spec.duration)) + cost
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


def bounds(h: History) -> dict[int, float | None]:
    """Per job, its starvation bound in seconds (None: not judgeable, the module docstring)."""
    _, _, longest = _cost_and_length(h)
    grace = longest + POLLS * h.schedule.seconds(h.schedule.timing.poll) + JITTER
    return {j: None if f is None else SLACK * f + grace for j, f in fair_finishes(h).items()}


@decides("starvation-bound", group="fairness", position=30)
def starvation_bound(h: History, name: str) -> Result:
    """Violated by every job that waited longer than its bound (the module docstring). Count: jobs."""
    if h.schedule.workload is None:
        return not_judged(name, "no tenant workload declared (--workload flood)")
    waits = job_waits(h)
    limit = bounds(h)
    live, queued = live_workers(h), backlogged(waits, h.t1)
    lines, jobs, undecided = [], [], []
    worst = sorted(waits, key=lambda w: -(w.wait - (limit[w.job] or 0.0)))
    for w in worst:
        b = limit[w.job]
        if b is None:  # its fair finish lies beyond the run's end: one that started is within it
            if w.started is None:
                undecided.append(w.job)
            continue
        if w.wait <= b:
            continue
        until = w.started if w.started is not None else h.t1
        ran = Counter(x.tenant for x in waits if x.tenant != w.tenant and x.started is not None
                      and w.enqueued <= x.started <= until)
        who = (f" while tenant {ran.most_common(1)[0][0]} ran {plural(ran.most_common(1)[0][1], 'job')}"
               if ran else "")
        waited = "waited" if w.started is not None else "never started in"
        lines.append(f"tenant {w.tenant}'s job {w.job} {waited} {w.wait:.2f} s{who}; the fair bound was "
                     f"{b:.2f} s ({live.at(until)} live workers, {queued.at(w.enqueued + 1e-9)} tenants "
                     f"with work queued at its enqueue)")
        jobs.append(w.job)
    if lines:
        return violated(name, lines, jobs)
    if undecided:
        return unknown(name, f"{plural(len(undecided), 'job')} could not be judged: no live worker was "
                             "left to give their tenant its share before the run ended")
    return held(name, f"every one of {plural(len(waits), 'job')} started within its fair-share bound")
