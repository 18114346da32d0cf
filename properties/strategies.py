"""Hypothesis strategies for schedules.

A schedule shrinks toward fewer jobs, fewer workers, fewer faults, the tenant 1 and the shortest
work: every choice below lists its simplest value first. Strike points are named, never times, so
a shrunk schedule replays the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from hypothesis import strategies as st

from ..core.schedule import JOB_POINTS, Event, JobSpec, Schedule, Timing, expand_workload
from ..core.workload import ORDERS, Workload
from ..faults.catalogue import CATALOGUE, MORE_VARIANTS, VARIANTS, Fault, event_variant

TENANTS = (1, 2, 3, None)  # None: a system job, which must see no tenant's rows
DURATIONS = (0.05, 0.02, 0.2)  # article seconds of work (all shorter than the lease)
MAX_JOBS = 12
MAX_WORKERS = 3
MAX_EVENTS = 3
# A flood workload (--workload flood): its parameters, each simplest first (issue 38). The flood's size
# is drawn from 1 up to the design's (FLOOD_SIZES, note only: what each library runs in the suite's and
# the bench's time; pgqueuer claims at about a tenth of the others' speed).
MAX_FLOOD = 300
FLOOD_SIZES = {"pgqueuer": 30,
               # measured, a flood of 10 on 2 workers at the library's default options and lowest time scale
               # (2026-12-06, loaded): chancy 0.54 s a hot job (its process executor at time scale 3), pg-boss
               # 0.26 s (a poll between jobs): 300 would take 160 s and 80 s a run; these about 16 s
               "chancy": 30, "pg-boss": 60}
MAX_SMALL_TENANTS = 6
MAX_SMALL_JOBS = 3

Point = tuple[str, bool]  # a statement point, bound when it belongs to a job (History.statements)
JobDraw = tuple[str | None, str | None, int | None, float, int | None]  # _job's
EventDraw = tuple[str, int | None, str, str]  # _event's


def flood(max_flood: int = MAX_FLOOD) -> st.SearchStrategy[Workload]:
    """A :class:`~core.workload.Workload` of kind flood: the flood shrinks toward one job, the small
    tenants toward one with one job, the order toward the flood first, the work toward 0.05 s."""
    return st.builds(Workload, kind=st.just("flood"), hot_tenant=st.just(1),
                     hot_jobs=st.integers(1, max_flood), small_tenants=st.integers(1, MAX_SMALL_TENANTS),
                     small_jobs=st.integers(1, MAX_SMALL_JOBS), order=st.sampled_from(ORDERS),
                     hot_duration=st.sampled_from(DURATIONS), small_duration=st.sampled_from(DURATIONS))


@overload
def _points(default: str, points: tuple[str, ...]) -> list[str]: ...
@overload
def _points(default: None, points: tuple[str, ...]) -> list[None]: ...
def _points(default: str | None, points: tuple[str, ...]) -> list[str] | list[None]:
    """The points a fault with *default* may strike at, the default first (None: the fault has no point)."""
    if default is None:
        return [None]
    return [default, *(p for p in points if p != default)]


def dequeue_budget(jobs: int, max_attempts: int) -> int:
    """Dequeues per worker: enough for every job's every attempt twice over, and a bound for
    designs that hand a poison job out forever (the article let one worker dequeue ten times)."""
    return 2 * jobs * max_attempts + 10


def _job(job_faults: Sequence[str], points: tuple[str, ...], max_attempts: int,
         cut_statements: Sequence[Point] = ()) -> st.SearchStrategy[JobDraw]:
    """(fault, point, tenant, duration, strikes) of one job; the point is None for the fault's
    default, strikes None for a fault on every execution (the simplest), else 1 .. max_attempts - 1
    (a transient fault: more strikes than attempts would be a fault on every execution). A fault that ends
    the worker (``crash``) may be drawn at a job's statement point of *cut_statements* too."""
    bound = [p for p, b in cut_statements if b]

    @st.composite
    def job(draw: st.DrawFn) -> JobDraw:
        fault = draw(st.sampled_from([None, *job_faults]))
        point = strikes = None
        if fault is not None:
            extra = bound if CATALOGUE[fault].cuts_worker else []
            p = draw(st.sampled_from(_points(CATALOGUE[fault].point, points) + extra))
            point = None if p == CATALOGUE[fault].point else p
            strikes = draw(st.sampled_from([None, *range(1, max_attempts)]))
        return fault, point, draw(st.sampled_from(TENANTS)), draw(st.sampled_from(DURATIONS)), strikes

    return job()


def _event(sup_faults: Sequence[str], jobs: int, points: tuple[str, ...], statements: Sequence[Point] = (),
           cut_statements: Sequence[Point] = ()) -> st.SearchStrategy[EventDraw]:
    """(fault, job, point, variant) of one supervisor event, on one of the *jobs* jobs that exist: an
    event drawn for a job that is not there would be dropped, and small schedules would lose most.
    *statements*: statement points ``(point, bound)`` it may strike at too (after the named ones); one
    that belongs to no job gets job None; *cut_statements*: more of them, for a fault that ends or cuts a
    worker (after a reply, at a COMMIT)."""
    if cut_statements and any(CATALOGUE[f].cuts_worker for f in sup_faults):
        named = [(p, True) for p in _points("mid-work", points)]
        cut = named + list(dict.fromkeys([*statements, *cut_statements]))
        plain = named + list(statements)
        return st.sampled_from(sup_faults).flatmap(lambda f: st.tuples(
            st.just(f), st.integers(1, jobs), st.sampled_from(cut if CATALOGUE[f].cuts_worker else plain),
            st.sampled_from(list(VARIANTS)))).map(lambda t: (t[0], t[1] if t[2][1] else None, t[2][0], t[3]))
    # The variant is drawn for every event and kept where the fault takes it (catalogue.event_variant).
    if statements:
        at = st.sampled_from([(p, True) for p in _points("mid-work", points)] + list(statements))
        return st.tuples(st.sampled_from(sup_faults), st.integers(1, jobs), at,
                         st.sampled_from(list(VARIANTS))).map(
            lambda t: (t[0], t[1] if t[2][1] else None, t[2][0], t[3]))
    where = st.sampled_from(_points("mid-work", points))
    return st.tuples(st.sampled_from(sup_faults), st.integers(1, jobs), where,
                     st.sampled_from(list(VARIANTS)))


def _spent(draw: st.DrawFn, jobs: list[JobSpec], job: int | None, point: str) -> int:
    """Executions an event on a job with a transient fault lets pass before it strikes: none (the
    simplest), or -- drawn only for such an event -- the fault's strikes, so that the event strikes the
    execution after the fault stopped (its last attempt, when the fault spent all others). Where the
    fault ends its executions at a point before *point*, they never reach it: nothing to let pass."""
    spec = next((j for j in jobs if j.id == job), None)
    if spec is None or not spec.strikes or not draw(st.booleans(), label="after the transient fault"):
        return 0
    at = (spec.point or CATALOGUE[spec.fault].point) if spec.fault else None
    if at in JOB_POINTS and point in JOB_POINTS and JOB_POINTS.index(point) > JOB_POINTS.index(at):
        return 0
    return spec.strikes


@st.composite
def schedules(draw: st.DrawFn, *, faults: Sequence[Fault], design: str, tenant_mode: str = "local",
              time_scale: float = 0.5, workers: int | None = None, max_jobs: int = MAX_JOBS,
              timing: Timing | None = None, max_attempts: int = 3, points: tuple[str, ...] = JOB_POINTS,
              statements: Sequence[Point] = (), cut_statements: Sequence[Point] = (),
              workload: str | None = None, max_flood: int | None = None) -> Schedule:
    """Schedules whose jobs and events carry only the given *faults* (catalogue entries), striking
    only at *points* (the design's: ``core.schedule.JOB_POINTS`` unless it has a relay), and at the
    statement points *statements* (every supervisor fault) and *cut_statements* (a fault that ends or cuts
    a worker: ``smallscope.cut_points``). With *workload* ``"flood"`` the schedule declares a flood
    (:func:`flood`, at most *max_flood* jobs, or N with ``"flood:N"``, else the design's FLOOD_SIZES, else
    MAX_FLOOD) and the
    drawn jobs -- none or more -- come after its jobs."""
    job_faults = [f.name for f in faults if f.kind == "job"]
    sup_faults = [f.name for f in faults if f.kind == "supervisor"]
    # A list of jobs (not a count, then jobs): Hypothesis's list shrinker deletes whole elements,
    # which is what "fewer jobs" needs. Ids follow queue order.
    kind, _, cap = (workload or "").partition(":")  # "flood:N": a flood of at most N jobs
    size = max_flood or (int(cap) if cap else FLOOD_SIZES.get(design, MAX_FLOOD))
    declared = draw(flood(size), label="workload") if kind == "flood" else None
    ahead = expand_workload(Schedule(jobs=(), workload=declared)).jobs
    drawn = draw(st.lists(_job(job_faults, points, max_attempts, cut_statements), min_size=0 if ahead else 1,
                          max_size=max_jobs if not ahead or job_faults else 0), label="jobs")
    jobs = list(ahead) + [JobSpec(id=i, tenant=t, duration=d, fault=f, point=p, strikes=k)
                          for i, (f, p, t, d, k) in enumerate(drawn, len(ahead) + 1)]
    n = len(jobs)
    events = []
    if sup_faults:
        # Several events may fall on one job; the same (job, point) twice strikes its next occurrence.
        seen: dict[tuple[int | None, str], int] = {}
        drawing = st.lists(_event(sup_faults, n, points, statements, cut_statements), max_size=MAX_EVENTS)
        for fault, job, point, variant in draw(drawing, label="events"):
            occurrence = seen[(job, point)] = seen.get((job, point), 0) + 1
            occurrence += _spent(draw, jobs, job, point)
            if fault in MORE_VARIANTS:  # more variants than the drawn positions: its own draw
                variant = draw(st.sampled_from(CATALOGUE[fault].variants), label="variant")
            events.append(Event(fault=fault, job=job, point=point, occurrence=occurrence,
                                variant=event_variant(fault, variant)))
    w = workers if workers is not None else draw(st.integers(1, MAX_WORKERS), label="workers")
    sched = Schedule(
        jobs=tuple(jobs), workers=w, events=tuple(events), design=design, tenant_mode=tenant_mode,
        time_scale=time_scale, timing=timing or Timing(), max_attempts=max_attempts,
        dequeues=dequeue_budget(n, max_attempts), workload=declared,
    )
    if timing is None:  # room for every job's every attempt; a stall ends a hung run sooner
        sched = sched.replace(timing=Timing(deadline=max(60.0, 15.0 * n * max_attempts)))
    return sched
