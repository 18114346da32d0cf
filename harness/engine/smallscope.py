"""The small-scope pass: before random generation, the smallest schedules that can show each
allowed fault at each point it can strike.

For every allowed fault and every strike point it can take (a job fault that changes the work
itself, ``overrun`` and ``slow``, has none), and once with no fault at all:

* **one job on two workers** -- what a second worker does to a job the first one lost (an overrun, a
  pause, a crash mid-job); for a supervisor fault, the event on that job at that point;
* **three jobs on one worker** -- what one job leaves to the next: a leaked tenant (tenant 1's job,
  then two system jobs with no tenant, which set none: what they begin with and run their own
  statements under is what the first one left, whoever's code sets the tenant), a blocked queue, a
  poisoned connection. Three, not two: a worker's pool of two connections hands them out in turn
  (psycopg_pool's: the connection returned longest ago first), so the second job gets the other
  connection and only the third gets the first job's back; a pool of one, or one that hands back the
  latest, gives the first job's connection to the second. Both later jobs are system jobs: a job of
  its own tenant would set it, and hide what was left. (A pool of N needs N + 1 jobs: the pass
  covers the pools of one and two connections that workers usually give their job bodies.)

And for every allowed job fault, once at its default point on **the first execution only** (a
transient fault, ``strikes`` 1: one job, two workers): a design that never retries, or retries
into the wrong state, ends the job other than done.

Then, once the runs above have shown which statements the design sends (``workers/body/statements.py``),
every supervisor fault that strikes between statements (its catalogue entry's ``at_statements``)
at each statement point, up to :data:`STATEMENT_CAP` of them (:func:`ranked`: a job-less worker's
statements first, then a job's, each in the order first sent): one job on
three workers (the one that sends the statement stopped there, the others free to act on what it
read: a check-then-act between two workers' statements), on the statement's first occurrence; the
job is short, so a worker that took it over has finished it when the stopped one goes on.

And every fault that ends or cuts a worker (its catalogue entry's ``cuts_worker``: crash, kill, terminate,
reset, lost-commit-reply) at the statement points around the design's statements and COMMITs
(:func:`cut_points`: a job's first -- its finish and failure paths -- after a COMMIT first, then after a
reply, before a COMMIT, before a statement; then those of no job), on one job with one worker and with
two, on the point's first occurrence, within :data:`CUT_RUNS` runs in all (:func:`cut_schedules`).
``crash`` is the job's own fault there (the worker ends itself: ``workers/body/statements.py``), the others
events. A design whose statements the wrapper cannot see (a library in another language, in a process of
its own) shows none: those faults then strike only at the body's named points.

A bug that such a schedule shows needs no luck to be found. A fault with variants (its catalogue
entry's ``variants``: ``horizon``'s xid and repeatable-read) is tried in each. When the user fixes
the number of workers, the first shape uses that number.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...core.schedule import (
    AFTER,
    COMMIT,
    JOB_POINTS,
    STATEMENT_PREFIX,
    Event,
    JobSpec,
    Schedule,
    Timing,
    is_before_statement,
)
from ...properties.strategies import dequeue_budget

SHAPE_ONE_JOB = "one job, two workers"
SHAPE_STATEMENT = "one job, three workers"
STATEMENT_CAP = 8  # statement points the small-scope pass strikes at, first sent first
CUT_RUNS = 40  # runs of the faults that end or cut a worker at statement points, in all (cut_schedules)
CUT_POINTS = 12  # statement points those faults are drawn at by the generator (cut_points)
SHAPE_JOBS_IN_TURN = "three jobs, one worker"
JOBS_IN_TURN = 3  # tenant 1, then system jobs: the first job's connection back in a pool of up to 2


def _shapes(workers: int | None) -> list[tuple[str, int, int]]:
    """(name, jobs, workers) of the two shapes."""
    return [(SHAPE_ONE_JOB, 1, workers or 2), (SHAPE_JOBS_IN_TURN, JOBS_IN_TURN, workers or 1)]


def _cases(faults, points: tuple[str, ...]) -> Iterable[tuple[str, str | None, str | None, str]]:
    """(label, fault, point, variant) for every fault at every one of *points* it can strike at (the
    design's: a relay's points only where the design has a relay)."""
    yield "no fault", None, None, "xid"
    for f in faults:
        strikes = points if (f.kind == "supervisor" or f.point is not None) else (None,)
        variants = f.variants or ("xid",)  # what the entry declares (horizon: xid, repeatable-read)
        for point in strikes:
            for variant in variants:
                label = f"{f.name} at {point}" if point else f.name
                if variant != "xid":
                    label += f" ({variant})"
                yield label, f.name, point, variant


def strikers(faults) -> list:
    """The allowed supervisor faults that strike between statements."""
    return [f for f in faults if f.kind == "supervisor" and f.at_statements]


def ranked(statements) -> list[tuple[str, bool]]:
    """The statement points struck at, at most :data:`STATEMENT_CAP`: those of no job first (a claim's
    statements before it has a job, a sweep: where two workers' check-then-act lies), then those of a
    job, each kind in the order first sent. Which statements a run shows first depends on timing (a
    heartbeat's tick, a sweep's); what a job-less worker sends before its first claim does not, so a
    cap never leaves out the race between two workers' claims."""
    unique = [p for p in dict.fromkeys(statements) if is_before_statement(p[0])]
    return ([p for p in unique if not p[1]] + [p for p in unique if p[1]])[:STATEMENT_CAP]


def statement_schedules(statements, *, faults, design: str, tenant_mode: str, time_scale: float,
                        workers: int | None = None, max_attempts: int = 3) -> list[tuple[str, Schedule]]:
    """The small-scope schedules between a design's statements (see the module docstring)."""
    out = []
    for point, bound in ranked(statements):
        for f in strikers(faults):
            # A short job: a worker that takes it over while the stopped one waits (a pause lasts two
            # leases) has finished it when that one goes on and acts on what it read before.
            s = Schedule(jobs=(JobSpec(id=1, tenant=1),), workers=workers or 3,
                         events=(Event(fault=f.name, job=1 if bound else None, point=point),), design=design,
                         tenant_mode=tenant_mode, time_scale=time_scale, max_attempts=max_attempts,
                         dequeues=dequeue_budget(1, max_attempts),
                         timing=Timing(deadline=max(60.0, 15.0 * max_attempts)))
            out.append((f"{f.name} at {point}{'' if bound else ' (no job)'}; {SHAPE_STATEMENT}", s))
    return out


# The faults that strand a job for a recovery statement to find (recovery_schedules), preferred in this
# order: the job's own crash, else an event that ends its worker.
STRANDERS = ("crash", "kill", "terminate")


def recovery_schedules(statements, recovery: tuple[str, ...], *, faults, design: str, tenant_mode: str,
                       time_scale: float, workers: int | None = None, max_attempts: int = 3,
                       plain: Iterable[str] | None = None) -> list[tuple[str, Schedule]]:
    """The faults that aim at recovery (``aims_at_recovery``: restart, deploy) before each of the design's
    *recovery* statements (its declared ``recovery_statements``; a point of no job strikes a maintenance
    pass), each variant of the fault, on the statement's first occurrence.

    A recovery statement the fault-free runs sent (*plain*: the statement points of the runs without a
    fault; None: every one of *statements*) is struck on one short job on two workers. One they did not
    send runs only when there is something to recover -- DBOS's re-enqueue at launch, a rescue of a
    stranded job -- so its first occurrence comes after a strand: the job is first stranded by a fault
    that ends its worker mid-work (the job's own ``crash``, else a ``kill`` or ``terminate`` event, the
    first of them the search allows), and the aimed fault strikes the recovery that follows (no job:
    recovery runs outside a body). Without such a fault one the runs showed is struck as the others, where
    it may never come (the run says the fault was not struck), and one they never showed is left out."""
    out = []
    aimed = [f for f in faults if f.kind == "supervisor" and f.aims_at_recovery]
    ran_plain = {p for p, _ in statements} if plain is None else set(plain)
    strander = next((f for n in STRANDERS for f in faults if f.name == n), None)
    points = [(p, b) for p, b in dict.fromkeys(statements)
              if is_before_statement(p) and p[len(STATEMENT_PREFIX):] in recovery]
    seen = {p for p, _ in points}
    if strander is not None:  # the declared ones no run showed: they can only come after a strand
        points += [(STATEMENT_PREFIX + n, False) for n in recovery if STATEMENT_PREFIX + n not in seen]
    for point, bound in points:
        by = strander if strander is not None and point not in ran_plain else None  # the strand's fault
        for f in aimed:
            for variant in f.variants or ("xid",):
                aim = Event(fault=f.name, job=1 if bound and by is None else None, point=point,
                            variant=variant)
                job = JobSpec(id=1, tenant=1)
                events = [aim]
                if by is not None and by.kind == "job":
                    job = JobSpec(id=1, tenant=1, fault=by.name, point="mid-work", strikes=1)
                elif by is not None:
                    events.insert(0, Event(fault=by.name, job=1, point="mid-work"))
                s = Schedule(jobs=(job,), workers=workers or 2, events=tuple(events),
                             design=design, tenant_mode=tenant_mode, time_scale=time_scale,
                             max_attempts=max_attempts, dequeues=dequeue_budget(1, max_attempts),
                             timing=Timing(deadline=max(60.0, 15.0 * max_attempts)))
                what = f" ({variant})" if variant != "xid" else ""
                after = f" after a {by.name} stranded job 1" if by is not None else ""
                out.append((f"{f.name}{what} at {point}{'' if aim.job else ' (no job)'}{after}; recovery", s))
    return out


def schedules(*, faults, design: str, tenant_mode: str, time_scale: float, workers: int | None = None,
              max_attempts: int = 3, points: tuple[str, ...] = JOB_POINTS) -> list[tuple[str, Schedule]]:
    """Every small-scope schedule, labelled ("crash at after-effect; three jobs, one worker")."""
    kinds = {f.name: f.kind for f in faults}
    out = []
    for label, fault, point, variant in _cases(faults, points):
        for shape, n, w in _shapes(workers):
            jobs = []
            events = []
            for i in range(1, n + 1):
                job_fault = fault if (i == 1 and fault and kinds[fault] == "job") else None
                tenant = 1 if i == 1 else None  # the later jobs system jobs: see the module docstring
                jobs.append(JobSpec(id=i, tenant=tenant, fault=job_fault, point=point if job_fault else None))
            if fault and kinds[fault] == "supervisor":
                assert point is not None  # _cases: a supervisor fault strikes at every point, never at none
                events.append(Event(fault=fault, job=1, point=point, variant=variant))
            s = Schedule(jobs=tuple(jobs), workers=w, events=tuple(events), design=design,
                         tenant_mode=tenant_mode, time_scale=time_scale, max_attempts=max_attempts,
                         dequeues=dequeue_budget(n, max_attempts),
                         timing=Timing(deadline=max(60.0, 15.0 * n * max_attempts)))
            out.append((f"{label}; {shape}", s))
    for f in faults:
        if f.kind == "job" and max_attempts > 1:
            w = workers or 2
            s = Schedule(jobs=(JobSpec(id=1, tenant=1, fault=f.name, strikes=1),), workers=w, design=design,
                         tenant_mode=tenant_mode, time_scale=time_scale, max_attempts=max_attempts,
                         dequeues=dequeue_budget(1, max_attempts),
                         timing=Timing(deadline=max(60.0, 15.0 * max_attempts)))
            out.append((f"{f.name} on the first execution only; {SHAPE_ONE_JOB}", s))
    return out


def cutters(faults) -> list:
    """The allowed faults that end or cut a worker (catalogue ``cuts_worker``)."""
    return [f for f in faults if f.cuts_worker]


def _cut_rank(item: tuple[str, bool]) -> int:
    point, bound = item
    commit = point == COMMIT or point.startswith(COMMIT + ":")
    after = point.endswith(AFTER)
    kind = 0 if commit and after else 1 if after else 2 if commit else 3
    return kind + (0 if bound else 4)


def cut_points(statements, *, cap: int | None = None) -> list[tuple[str, bool]]:
    """Every statement point ``(point, bound)`` a run showed, the job's first (its finish and failure
    paths), after a COMMIT first, then after a reply, before a COMMIT, before a statement; then those of
    no job in the same order; each kind in the order first sent (the sort is stable)."""
    return sorted(dict.fromkeys(statements), key=_cut_rank)[:cap]


def cut_schedules(statements, *, faults, design: str, tenant_mode: str, time_scale: float,
                  workers: int | None = None, max_attempts: int = 3,
                  progress=lambda s: None) -> list[tuple[str, Schedule]]:
    """The faults that end or cut a worker at each statement point (see the module docstring), on one
    job with one worker and with two, at most :data:`CUT_RUNS` schedules. ``crash`` takes only a job's
    points (a job fault; ``strikes`` 1: the first execution), the others a job-less point too. No
    statement seen: *progress* says so (the faults strike at the body's named points only)."""
    out: list[tuple[str, Schedule]] = []
    if cutters(faults) and not statements:
        names = ", ".join(f.name for f in cutters(faults))
        progress(f"no statement of {design}'s passed the statement wrapper (a library in another language "
                 f"or process?): {names} strike only at the body's points")
    for point, bound in cut_points(statements):
        for f in cutters(faults):
            if f.kind == "job" and not bound:
                continue
            for w in ([workers] if workers else [1, 2]):
                job = (JobSpec(id=1, tenant=1, fault=f.name, point=point, strikes=1) if f.kind == "job"
                       else JobSpec(id=1, tenant=1))
                events = () if f.kind == "job" else (
                    Event(fault=f.name, job=1 if bound else None, point=point),)
                s = Schedule(jobs=(job,), workers=w, events=events, design=design, tenant_mode=tenant_mode,
                             time_scale=time_scale, max_attempts=max_attempts,
                             dequeues=dequeue_budget(1, max_attempts),
                             timing=Timing(deadline=max(60.0, 15.0 * max_attempts)))
                shape = f"one job, {w} worker{'s' if w > 1 else ''}"
                out.append((f"{f.name} at {point}{'' if bound else ' (no job)'}; {shape}", s))
    return out[:CUT_RUNS]


# --- the last attempt reached (issue 36, item 3) ----------------------------------------------------
SHAPE_LAST = "one job, three workers, its attempts spent"
# job faults that end an execution at once (hang waits out max runtime; overrun and slow finish late)
SPENDING = ("crash", "raise", "sql-error")


def last_attempt_schedules(statements, *, faults, design: str, tenant_mode: str, time_scale: float,
                           workers: int | None = None, max_attempts: int = 3) -> list[tuple[str, Schedule]]:
    """Schedules that spend a job's attempts before the interesting strike, so that what acts only on an
    exhausted job (a sweep to dead, a handler at the last attempt) is reached: the job's fault strikes its
    first K = max_attempts - 1 executions (``JobSpec.strikes``), then, for each allowed supervisor fault,
    that fault strikes its last execution at each job point (the spending fault ends an execution at its
    default point, mid-work: a later point's first occurrence is the last execution's, an earlier one's
    the (K+1)-th), or stops a worker at each job-less statement point of :func:`ranked` (a sweep's read
    and write) for as long as the job's every attempt takes. Without a supervisor fault the last
    execution runs clean. One per spending job fault allowed (:data:`SPENDING`); none when max_attempts
    is 1."""
    k = max_attempts - 1
    spenders = [f for f in faults if f.kind == "job" and f.name in SPENDING]
    if k < 1 or not spenders:
        return []
    mid = JOB_POINTS.index("mid-work")
    lease = Timing().lease
    out = []
    for spend in spenders:
        job = JobSpec(id=1, tenant=1, fault=spend.name, strikes=k)
        finals: list[tuple[str, tuple[Event, ...]]] = [("the last runs clean", ())]
        for f in faults:
            if f.kind != "supervisor":
                continue
            for point in JOB_POINTS:
                n = 1 if JOB_POINTS.index(point) > mid else k + 1
                finals.append((f"{f.name} at {point} of the last",
                               (Event(fault=f.name, job=1, point=point, occurrence=n),)))
            if f.at_statements:
                for point, bound in ranked(statements):
                    if not bound:  # long enough for every attempt's lease to expire in turn
                        stop = Event(fault=f.name, job=None, point=point, duration=2.0 * lease * max_attempts)
                        finals.append((f"{f.name} at {point} (no job)", (stop,)))
        for what, events in finals:
            s = Schedule(jobs=(job,), workers=workers or 3, events=events, design=design,
                         tenant_mode=tenant_mode, time_scale=time_scale, max_attempts=max_attempts,
                         dequeues=dequeue_budget(1, max_attempts),
                         timing=Timing(deadline=max(60.0, 15.0 * max_attempts)))
            out.append((f"{spend.name} on {k} executions, {what}; {SHAPE_LAST}", s))
    return out
