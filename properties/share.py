"""A tenant's share of the bodies running (issue 46): never above the cap a design declares, and every
worker when the tenant alone has work queued.

``tenant-cap``: a design that promises at most N of one tenant's jobs running at once across all its
workers (``tenant_cap``, ``workers/design.py``: ``lease-tenant-cap``'s ``cap``, a hosted library's
per-tenant lock, queue or partition limit; the history records it) is judged on its executions: no tenant
had more than N alive at once, each from its ``started`` record to its end (as ``core/overlap.py`` counts
bodies). A job of no tenant counts as one more tenant (the designs cap it so). Not judged without a
declared cap. The cap counts executions, not what the design counts: ``lease-tenant-cap`` counts leases
held, so an execution that outlives its lease runs beside the one that re-claimed its job and exceeds the
cap (the evidence says so). Hazard: a built-in design's finish commits -- and frees the tenant's slot --
before its ``finished`` line is written, and another worker may claim and write ``started`` in between.
An execution that finished is therefore held to its last line known to precede that commit (the body's
effect, the last step before the finish) for a verdict of violated; one that overlaps another only
between that line and its ``finished`` line cannot be ordered, and without a violation the result is
unknown. A hosted library's body writes ``finished`` before the library's own finish frees the slot, so its
lines order both ends.

``work-conserving``: while one tenant alone had jobs queued (enqueued, not yet started: ``core/waits.py``),
no worker that could have taken one sat without a body for longer than :func:`idle_limit` -- a poll (it
looks at least that often) and a lease (what the designs themselves allow a live worker to go unheard,
so a loaded machine's hiccup shorter than it is not judged). A fair design must not idle workers when
only one tenant has work: a cap that holds a lone tenant to N workers violates it. Judged conservatively,
on what the log shows to be the design's choice:

- a worker counts from its first ``started`` (it has shown it claims and runs a body: before it, its
  fork, its connection and a library's launch, which no design can give to a tenant) to its death; one
  that never ran a body while a lone tenant's jobs waited makes the verdict unknown, not held;
- a worker that runs several bodies at once counts as idle only with none running (how many more it may
  run is its own setting, not judged here);
- a ``claim-failed`` line ends an idle stretch (the worker tried);
- only the run before the supervisor's first fault or watched point: a paused, cut-off or restarting
  worker is not idle by the design's choice;
- a hosted library polls on its own interval, which the harness does not know: not judged.

Unknown when nothing could be judged (no stretch longer than the limit where one tenant alone had jobs
queued and a worker had run a body: fewer jobs than workers, say), or when the only idle worker never ran
a body (starting up or held back: the log cannot tell). Stretches where several tenants had work
queued are not judged: how the workers are shared among them is ``starvation-bound``'s.

Both are in the group ``fairness`` (outside the default gate); ``work-conserving`` is judged under a
declared tenant workload, ``tenant-cap`` also wherever the design declares a cap (``properties.applying``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ..core.events import LogEvent, event_of
from ..core.history import Execution, History
from ..core.waits import job_waits
from .core import REGISTRY, Mark, Result, decides, held, not_judged, unknown, violated


def _tenant(t: int | None) -> str:
    return "jobs of no tenant" if t is None else f"tenant {t}"


def _end(h: History, ex: Execution) -> float:
    return max(ex.start, ex.end if ex.end is not None else h.t1)


def _known_end(h: History, ex: Execution) -> float:
    """The latest moment *ex* is known to have held its tenant's slot (the module docstring's hazard)."""
    end = _end(h, ex)
    if h.hosted or ex.outcome != "ok":
        # a failure is dated when the body raised, before the rollback or the error handler frees the slot
        # (Execution.failed); a death leaves the slot held
        return end
    struck: list[float] = [float(f["t"]) for f in ex.faults if f.get("t") is not None]
    return min(end, max([ex.start, *ex.effect_times, *struck]))


def _peak(spans: Iterable[tuple[float, float, Execution]]) -> tuple[int, float, list[Execution]]:
    """The most of *spans* alive at once, when that was first reached and which they were (an end at t
    before a start at t; an empty span occupies nothing)."""
    spans = [s for s in spans if s[1] > s[0]]
    edges = sorted([(a, 1, i) for i, (a, _, _) in enumerate(spans)]
                   + [(b, -1, i) for i, (_, b, _) in enumerate(spans)], key=lambda e: (e[0], e[1]))
    alive: set[int] = set()
    best: tuple[int, float, list[Execution]] = (0, 0.0, [])
    for t, step, i in edges:
        if step < 0:
            alive.discard(i)
            continue
        alive.add(i)
        if len(alive) > best[0]:
            best = (len(alive), t, sorted((spans[k][2] for k in alive), key=lambda e: e.start))
    return best


def _names(execs: list[Execution], at: float) -> str:
    return ", ".join(f"{ex.worker} job {ex.job}"
                     + (" (past its lease)" if ex.lease_until is not None and ex.lease_until < at else "")
                     for ex in execs)


@decides("tenant-cap", group="fairness", position=31)
def tenant_cap(h: History, name: str) -> Result:
    """Violated by every tenant that had more executions alive at once than the design's declared cap
    (the module docstring); count: tenants, jobs: those alive at its peak."""
    cap = h.tenant_cap
    if cap is None:
        return not_judged(name, "the design declares no per-tenant cap (tenant_cap: the most of one "
                                "tenant's jobs it promises to run at once)")
    by_tenant: dict[int | None, list[Execution]] = defaultdict(list)
    for ex in h.executions():
        by_tenant[ex.tenant].append(ex)
    if not by_tenant:
        return held(name, f"vacuous: no execution ran (the declared cap: {cap})")
    lines: list[str] = []
    jobs: list[int] = []
    unsure: list[str] = []
    most = 0
    first: Mark | None = None
    for tenant in sorted(by_tenant, key=lambda t: (t is None, t or 0)):
        execs = by_tenant[tenant]
        n, at, alive = _peak((ex.start, _known_end(h, ex), ex) for ex in execs)
        most = max(most, n)
        if n > cap:
            late = any(ex.lease_until is not None and ex.lease_until < at for ex in alive)
            lines.append(f"{_tenant(tenant)} had {n} executions running at once {at - h.t0:.2f} s into the "
                         f"run, over the cap of {cap} {h.design} declares: {_names(alive, at)}"
                         + ("; an execution past its lease runs beside the one that re-claimed its job "
                            "(a cap on leases held does not stop it)" if late else ""))
            jobs += [ex.job for ex in alive]
            last = max(alive, key=lambda ex: ex.start)  # the start that went over the cap
            first = first or Mark(at, "execution", last.worker, last.job,
                                  f"{_tenant(tenant)}'s job {last.job} started as its execution {n} "
                                  f"running at once, over the cap of {cap}", attempt=last.attempt)
            continue
        m, at, alive = _peak((ex.start, _end(h, ex), ex) for ex in execs)
        if m > cap:
            unsure.append(f"{_tenant(tenant)}: {_names(alive, at)} {at - h.t0:.2f} s into the run")
    if lines:
        return violated(name, lines, jobs, event=first)
    if unsure:
        return unknown(name, f"over the cap of {cap} only where a finish may have committed before its "
                             f"'finished' line, which the log cannot order: {unsure[0]}"
                             + (f" (and {len(unsure) - 1} more)" if len(unsure) > 1 else ""))
    return held(name, f"no tenant had more than {cap} of its executions running at once (the cap {h.design} "
                      f"declares; the most: {most})")


# Judged wherever the design declares a cap, with or without a workload (properties.applying).
WHERE_CAPPED = frozenset(n for n, p in REGISTRY.items() if p.check is tenant_cap)


def idle_limit(h: History) -> float:
    """Real seconds a worker may go without a body while a lone tenant has work queued: a poll and a lease
    (the module docstring)."""
    return h.schedule.seconds(h.schedule.timing.poll + h.schedule.timing.lease)


def lone_stretches(h: History) -> list[tuple[float, float, int | None]]:
    """Where exactly one tenant had jobs queued (enqueued, not yet started), and which: ``(from, to,
    tenant)``, in time order."""
    spans: dict[int | None, list[tuple[float, float]]] = defaultdict(list)
    for w in job_waits(h):
        spans[w.tenant].append((w.enqueued, w.started if w.started is not None else h.t1))
    cuts = sorted({t for ss in spans.values() for a, b in ss for t in (a, b)})
    out: list[tuple[float, float, int | None]] = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        mid = (a + b) / 2
        queued = [t for t, ss in spans.items() if any(x <= mid < y for x, y in ss)]
        if len(queued) != 1:
            continue
        if out and out[-1][1] == a and out[-1][2] == queued[0]:
            out[-1] = (out[-1][0], b, queued[0])
        else:
            out.append((a, b, queued[0]))
    return out


def _window_end(h: History) -> tuple[float, str]:
    """The end of what is judged: the supervisor's first fault or watched point (the module docstring)."""
    marks = [(i["t"], f"the supervisor's first fault ({i.get('fault')})") for i in h.injected if "t" in i]
    marks += [(r["t"], f"{r['worker']}'s wait at a watched point") for r in h.records
              if event_of(r) == LogEvent.POINT]
    return min(marks, default=(h.t1, ""), key=lambda m: m[0])


def _idle(h: History, worker: str, execs: list[Execution], live_from: float, until: float,
          tries: list[float]) -> list[tuple[float, float]]:
    """*worker*'s stretches without a body from *live_from* to *until*, cut at each claim that failed."""
    out = []
    at = live_from
    for ex in sorted(execs, key=lambda e: e.start):
        if ex.start > at:
            out.append((at, ex.start))
        at = max(at, _end(h, ex))
    if until > at:
        out.append((at, until))
    cut = []
    for a, b in out:
        for t in sorted(x for x in tries if a < x < b):
            cut.append((a, t))
            a = t
        cut.append((a, b))
    return cut


@decides("work-conserving", group="fairness", position=32)
def work_conserving(h: History, name: str) -> Result:
    """Violated by every worker that went without a body for longer than :func:`idle_limit` while one
    tenant alone had jobs queued (the module docstring); count: such stretches, jobs: the tenant's jobs
    queued through one."""
    if h.hosted:
        return not_judged(name, "a hosted library polls on its own interval, which the harness does not "
                                "know: an idle worker may be waiting for its next poll")
    limit = idle_limit(h)
    stop, why = _window_end(h)
    lone = [(a, min(b, stop), t) for a, b, t in lone_stretches(h) if min(b, stop) - a > limit]
    after = f" before {why}" if why else ""
    if not lone:
        return unknown(name, f"nothing to judge: no stretch of more than {limit:.2f} s (a poll and a lease) "
                             f"where one tenant alone had jobs queued{after}")
    execs: dict[str, list[Execution]] = defaultdict(list)
    for ex in h.executions():
        execs[ex.worker].append(ex)
    first: dict[str, float] = {}
    tries: dict[str, list[float]] = defaultdict(list)
    for r in h.records:
        w = r.get("worker")
        if isinstance(w, str):
            first[w] = min(first.get(w, r["t"]), r["t"])
            if event_of(r) == LogEvent.CLAIM_FAILED:
                tries[w].append(r["t"])
    dead = h.death_times()
    waits = job_waits(h)
    lines: list[str] = []
    waiting: list[int] = []  # the lone tenant's jobs queued through an idle stretch
    idle: Mark | None = None
    unready: list[str] = []
    judged = 0.0
    for worker in sorted(first):
        gone = min(dead.get(worker, h.t1), h.t1)
        ready = min((ex.start for ex in execs[worker]), default=None)
        if ready is None:  # it never ran a body: starting up or held back, the log cannot tell
            for a, b, t in lone:
                start = max(a, first[worker])
                end = min(b, gone)
                if end - start > limit:
                    unready.append(f"{worker} was live from {start - h.t0:.2f} s to {end - h.t0:.2f} s while "
                                   f"{_tenant(t)} alone had jobs queued, and never ran a body")
            continue
        judged += sum(max(0.0, min(b, gone) - max(a, ready)) for a, b, _ in lone)
        for i0, i1 in _idle(h, worker, execs[worker], ready, gone, tries[worker]):
            for a, b, t in lone:
                start = max(a, i0)
                end = min(b, i1)
                if end - start <= limit:
                    continue
                others = sum(1 for w, xs in execs.items() if w != worker for ex in xs
                             if ex.tenant == t and start <= ex.start < end)
                lines.append(f"{worker} ran no body for {end - start:.2f} s (from {start - h.t0:.2f} s) "
                             f"while {_tenant(t)} alone had jobs queued, over a poll and a lease "
                             f"({limit:.2f} s); other workers started {others} of its jobs meanwhile")
                waiting += [w.job for w in waits if w.tenant == t and w.enqueued <= start
                            and (w.started is None or w.started >= end)]
                idle = idle or Mark(end, "idle", worker, None,
                                    f"{worker} ran no body for {end - start:.2f} s while {_tenant(t)} "
                                    "alone had jobs queued", since=start)
    if lines:
        return violated(name, lines, waiting, event=idle)
    if unready:
        return unknown(name, f"{unready[0]}: starting up or held back, the log cannot tell"
                             + (f" (and {len(unready) - 1} more)" if len(unready) > 1 else ""))
    if judged <= limit:
        return unknown(name, f"nothing to judge: no worker that had run a body was live for more than "
                             f"{limit:.2f} s while one tenant alone had jobs queued{after}")
    return held(name, f"while one tenant alone had jobs queued ({judged:.2f} worker-seconds judged{after}), "
                      f"no worker went more than {limit:.2f} s (a poll and a lease) without a body")
