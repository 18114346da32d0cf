"""Coverage figures of a run, from its history: what became of each fault the schedule placed, and
how retries were spaced. Figures for the report and the search's coverage, never verdicts (those are
``properties/``)."""

from __future__ import annotations

from collections import Counter
from typing import TypedDict

from .events import LogEvent
from .history import Execution, History


class FaultFate(TypedDict):
    """What became of one fault the schedule placed (:func:`fault_fates`)."""

    fault: str
    job: int | None
    point: str
    fate: str


def fault_fates(h: History) -> list[FaultFate]:
    """What became of every fault the schedule placed: ``{"fault", "job", "point", "fate"}`` with
    fate ``struck``, ``never reached`` (no execution got to its point: its job crashed earlier,
    finished elsewhere, ...) or ``worker gone`` (a supervisor event whose point was reached by a
    worker that died before the strike). Coverage, not a verdict: in a random schedule a fault
    that never fires is normal."""
    out: list[FaultFate] = []
    struck = [r for r in h.records if r.get("event") == LogEvent.FAULT]
    struck_jobs = {(r.get("job"), r.get("point")) for r in struck}
    struck_any = {r.get("job"): r.get("point") for r in struck}
    for j in h.schedule.jobs:
        if not j.fault:
            continue
        point = j.point
        hit = (j.id, point) in struck_jobs if point else j.id in struck_any
        changes_work = not hit and point is None and any(
            r.get("event") == LogEvent.STARTED and r.get("job") == j.id for r in h.records)
        fate = "struck" if hit or changes_work else "never reached"
        out.append({"fault": j.fault, "job": j.id, "point": point or struck_any.get(j.id) or "default",
                    "fate": fate})
    # (job, point) -> how many times an execution reached it; job None: a statement point of no job
    reached = Counter((r.get("job"), r.get("point")) for r in h.records if r.get("event") == LogEvent.POINT)
    injected = {(x.get("fault"), x.get("job"), x.get("point")) for x in h.injected}
    for e in h.schedule.events:
        key = (e.job, e.point)
        if (e.fault, e.job, e.point) in injected:
            fate = "struck"
        elif reached.get(key, 0) >= e.occurrence:
            fate = "worker gone"
        else:
            fate = "never reached"
        out.append({"fault": e.fault, "job": e.job, "point": e.point, "fate": fate})
    return out


def retry_gaps(h: History) -> list[float]:
    """How each retry was spaced, in leases: from the end of an execution that did not finish (it
    failed, or its worker died) to the start of the job's next execution. A figure, not a verdict
    (the article: a failed job comes straight back, back to back)."""
    lease = float(h.schedule.timing.lease or 1.0) * float(h.schedule.time_scale or 1.0)
    by_job: dict[int, list[Execution]] = {}
    for ex in h.executions():
        by_job.setdefault(ex.job, []).append(ex)
    gaps = []
    for runs in by_job.values():
        for prev, nxt in zip(runs, runs[1:], strict=False):
            if prev.outcome != "ok" and prev.end is not None and nxt.start >= prev.end:
                gaps.append((nxt.start - prev.end) / lease)
    return gaps
