"""One shrunk schedule per violated property.

Hypothesis shrinks the first violation it meets, toward whichever gated property the smaller runs still
violate; a report's other violated properties would be left with whatever run happened to show them (a
12-job run, say, while the counterexample is a 1-job run of another property). After the search, each
violated *gated* property (``--fail-on``/``--allow``) gets its own: the smallest observed run that
violated it, shrunk greedily for *that* property -- a candidate is kept only when its real run violates
the property again. A property outside the gate keeps the smallest run observed, as found.

The candidates (:func:`candidates`), likeliest to keep the violation first: only the jobs the
violation names (its ``Result.jobs``), each half of the jobs, each job left out, one worker fewer, each
supervisor event left out, each job's fault dropped. Every candidate is strictly smaller
(:func:`size`), so shrinking ends; each run is a real run of the search, paid from its one shrink budget
(``harness/engine/search.py``: ``SHRINK_RUNS``), and a run seen before costs nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

from ...core.schedule import Schedule
from ...properties import PROPERTIES
from .outcome import AS_FOUND, BUDGET_SPENT, SHRUNK, Run, SearchOutcome, Shown, size


def keep(s: Schedule, ids: Sequence[int]) -> Schedule | None:
    """*s* with only the jobs *ids* (and the events of those jobs, or of none); None when none is left."""
    wanted = set(ids)
    jobs = tuple(j for j in s.jobs if j.id in wanted)
    if not jobs or len(jobs) == len(s.jobs):
        return None
    return s.replace(jobs=jobs, events=tuple(e for e in s.events if e.job is None or e.job in wanted))


def candidates(s: Schedule, offending: Sequence[int]) -> Iterator[Schedule]:
    """Schedules simpler than *s*, in the order tried (see the module docstring); *offending*: the
    jobs the violation names."""
    ids = [j.id for j in s.jobs]
    half = len(ids) // 2
    # A declared workload's jobs are its parameters' (core/workload.py: Hypothesis shrinks those); a
    # schedule with one must hold every job of it, so none is left out here.
    subsets = [] if s.workload is not None else [
        [i for i in ids if i in set(offending)], ids[:half], ids[half:],
        *([i for i in ids if i != x] for x in reversed(ids))]
    for subset in subsets:
        kept = keep(s, subset)
        if kept is not None:
            yield kept
    if s.workers > 1:
        yield s.replace(workers=s.workers - 1)
    for k in range(len(s.events)):
        yield s.replace(events=s.events[:k] + s.events[k + 1:])
    for k, j in enumerate(s.jobs):
        if j.fault is not None:
            plain = dataclasses.replace(j, fault=None, point=None, strikes=None)
            yield s.replace(jobs=s.jobs[:k] + (plain,) + s.jobs[k + 1:])


def shrink(start: Run, name: str, execute: Callable[[Schedule], Run | None]) -> tuple[Run, bool]:
    """The smallest run found that violates *name*, greedily from *start*, and whether shrinking ran
    to its end (False: *execute* returned None, the shrink budget is spent). *execute* runs a schedule
    (a cached run is returned as it is) or returns None when no run may be spent."""
    best = start
    while True:
        offending = best.results[name].jobs if name in best.results else ()
        for candidate in candidates(best.schedule, offending):
            if size(candidate) >= best.size:
                continue
            r = execute(candidate)
            if r is None:
                return best, False
            if name in r.violated:
                best = r
                break
        else:
            return best, True


def per_property(out: SearchOutcome, gate: Sequence[str], execute: Callable[[Schedule], Run], *,
                 seen: Callable[[Schedule], bool], limit: int) -> None:
    """Fill ``out.shown``: for every property some run of *out* violated, in :data:`PROPERTIES` order, a
    gated one's smallest run shrunk for it (:func:`shrink`), another's the smallest observed, as found.
    *execute* runs a schedule (one *seen* before is returned as it was, at no cost); a new run is paid
    from ``out.shrink_runs``, which may not pass *limit* (the search's one shrink budget)."""

    def paid(schedule: Schedule) -> Run | None:
        if not seen(schedule):
            if out.shrink_runs >= limit:
                return None
            out.shrink_runs += 1
        return execute(schedule)

    for name in PROPERTIES:
        start = out.smallest_for(name)
        if start is None:
            continue
        if name not in gate:
            out.shown[name] = Shown(start, AS_FOUND)
            continue
        run, done = shrink(start, name, paid)
        out.shown[name] = Shown(run, SHRUNK if done else BUDGET_SPENT)
