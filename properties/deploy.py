"""What a deploy does to the jobs in a worker's hands: judged only in runs whose schedule has a deploy event
(``faults/supervisor.py``'s deploy); :data:`DEPLOY_ONLY` are left out of every other run's table
(``properties.check``).

The evidence: the supervisor's ``deploy`` record (``History.injected``) says when the worker got SIGTERM,
the grace it was given (real seconds) and the jobs in its hands ``[job, attempt]`` per its log; the
execution log says how each of those executions ended and whether the job ran again.
"""

from __future__ import annotations

from ..core.events import FaultStep
from ..core.history import History
from .checks import by_job, plural
from .core import REGISTRY, Mark, Result, decides, held, unknown, violated

DEPLOY = "deploy"  # the catalogue's name (faults/catalogue.py); this layer reads the schedule's events


def deployed(h: History) -> bool:
    """The run's schedule has a deploy event (it may not have struck: the job never reached its point)."""
    return any(e.fault == DEPLOY for e in h.schedule.events)


def needed_seconds(h: History, job: int) -> float | None:
    """The grace job *job* needs to finish, in real seconds: its whole work (it may have just begun) and a
    lease for what follows the work (the effect, the finishing statements, a relay's delivery) -- the
    lease being the design's own bound on a finish. None for a job the schedule does not list."""
    spec = next((j for j in h.schedule.jobs if j.id == job), None)
    if spec is None:
        return None
    return h.schedule.seconds(spec.duration + h.schedule.timing.lease)


@decides("graceful-completes", group="liveness", position=45)
def graceful_completes(h: History, name: str) -> Result:
    """A job in the hands of a worker that got a deploy's SIGTERM, with at least the grace the job needed
    (:func:`needed_seconds`), finishes once, in that worker (its execution ends ``ok``), and is never
    executed again. Violated by every such job that did not, or ran again. A job that carries a fault of
    its own, or that another supervisor fault aims at, is left to the properties of those faults; a job
    given a shorter grace is not judged here (the runs it took and what it lost are
    ``at-most-once-effects``', ``bounded-attempts``' and ``progress``' business). Unknown when the
    schedule's deploy never struck (the job it aimed at never reached its point); vacuously held when none
    had such a job in hand, or the schedule has no deploy (a run's table then leaves it out).
    Count: jobs.

    That every job enqueued before a deploy reaches a terminal state is ``terminal-states``' (every job
    ``done`` or ``dead`` at the end, none stuck ``running``: a job a SIGKILL after the grace left behind is
    recovered by its lease, within the run, or reported there) and, for the jobs no fault aims at,
    ``progress``' (each ends ``done``; the job a deploy event names counts as one with a fault, as a
    ``kill``'s does: ``History.job_faults``, so a job swept to ``dead`` after a SIGKILL is terminal, not a
    violation)."""
    deploys = [i for i in h.injected if i.get("fault") == FaultStep.DEPLOY]
    if not deploys and not deployed(h):  # shown only where the schedule has one (DEPLOY_ONLY)
        return held(name, "vacuous: no deploy in this run's schedule")
    if not deploys:
        return unknown(name, "no deploy struck in this run (its job never reached the point)")
    other_events = {e.job for e in h.schedule.events if e.fault != DEPLOY}
    faulted = {j.id for j in h.schedule.jobs if j.fault is not None}
    runs = by_job(h.executions())
    killed = {i.get("worker") for i in h.injected if i.get("fault") == FaultStep.GRACE_KILL}
    judged: list[int] = []
    lines: list[str] = []
    bad: list[int] = []
    first_event: Mark | None = None
    short = aside = 0
    for d in deploys:
        worker = d.get("worker")
        t = d["t"]
        grace = float(d.get("seconds") or 0.0)
        for job, attempt in d.get("in_hand") or []:
            if job in faulted or job in other_events:
                aside += 1
                continue
            needed = needed_seconds(h, job)
            if needed is None or grace < needed:
                short += 1
                continue
            judged.append(job)
            execs = runs.get(job, [])
            mine = next((e for e in execs if e.worker == worker and e.attempt == attempt), None)
            again = [e for e in execs if e is not mine and e.start > t]
            if mine is None or mine.outcome != "ok":
                how = "was SIGKILLed after it" if worker in killed else (
                    f"ended it {mine.outcome}" if mine is not None else "has no record of it")
                lines.append(f"job {job} attempt {attempt}: {worker} got SIGTERM with a grace of "
                             f"{grace:.2f} s (the job needed at most {needed:.2f} s) and {how}")
                end = mine.end if mine is not None and mine.end is not None else t + grace
                first_event = first_event or Mark(end, "execution", worker or "", job, lines[-1],
                                                  attempt=attempt, since=t)
                bad.append(job)
            elif again:
                first = again[0]
                lines.append(f"job {job} finished in {worker} after its SIGTERM and ran again: "
                             f"{first.worker} attempt {first.attempt} at +{first.start - h.t0:.2f} s")
                first_event = first_event or Mark(first.start, "execution", first.worker, job, lines[-1],
                                                  attempt=first.attempt)
                bad.append(job)
    if bad:
        return violated(name, lines, sorted(set(bad)), event=first_event)
    if not judged:
        why = []
        if short:
            why.append(f"{plural(short, 'job')} with a shorter grace than it needed")
        if aside:
            why.append(f"{plural(aside, 'job')} with a fault of its own")
        what = "; ".join(why) or "no job in the deployed workers' hands"
        return held(name, f"vacuous: {plural(len(deploys), 'SIGTERM')}, no job to judge: {what}")
    return held(name, f"{plural(len(set(judged)), 'job')} in a deployed worker's hands finished there "
                      f"within the grace and never ran again ({plural(len(deploys), 'SIGTERM')})")


DEPLOY_ONLY = frozenset(n for n, p in REGISTRY.items() if p.check.__module__ == __name__)
