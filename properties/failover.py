"""What a failover does to jobs: judged only in runs on the replicated back end (the schedule's
``replica``); :data:`REPLICA_ONLY` are left out of every other run's table (``properties.check``).

The evidence is the client's side: the runner enqueued the schedule's jobs and its commit returned
before any worker started (an acknowledged enqueue); each execution's ``started`` record carries the
attempt number its claim returned, and a ``finished`` record is written only after its commit returned.
A failover of a lagging standby loses what the old primary acknowledged and the standby never received,
so the new primary's tables cannot be the only witness. ``success-final`` (``properties/final.py``)
names a lost completion that ran again.
"""

from __future__ import annotations

from ..core.history import History
from .checks import by_job, job_rows, last_seen, plural, rows_undecidable, who
from .core import REGISTRY, Mark, Result, decides, held, unknown, violated


def replicated(h: History) -> bool:
    """The run was on the replicated back end (its schedule, stamped by the runner, says so)."""
    return bool(h.schedule.replica or (h.server or {}).get("replica"))


@decides("acknowledged-enqueue", group="safety", position=40)
def acknowledged_enqueue(h: History, name: str) -> Result:
    """Violated by every job of the schedule (its enqueue committed and was acknowledged before the run)
    that is not in the final jobs table. Unknown when the table was not read. Count: jobs."""
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    rows = job_rows(h)
    gone = [j.id for j in h.schedule.jobs if j.id not in rows]
    if gone:
        lost = h.promotions()
        after = f" after {plural(len(lost), 'failover')}" if lost else ""
        t = lost[0] if lost else h.t1
        return violated(name, [f"job {j} was enqueued (committed, acknowledged) and is not in the final "
                               f"jobs table{after}" for j in gone], gone,
                        event=Mark(t, "failover", "", gone[0],
                                   f"job {gone[0]}'s acknowledged enqueue was lost"
                                   + (" when the primary stopped" if lost else "")))
    return held(name, f"all {plural(len(h.schedule.jobs), 'acknowledged enqueue')} in the final jobs table"
                      + (f" across {plural(len(h.promotions()), 'failover')}" if h.promotions() else ""))


@decides("attempts-monotonic", group="safety", position=41)
def attempts_monotonic(h: History, name: str) -> Result:
    """Violated by every job whose attempt count went down: an execution started with a smaller
    attempt number than an earlier one (a rollback repeats a number, never lowers it), or with the
    number of an earlier execution whose success was acknowledged (that count had committed), or the
    final ``jobs.attempts`` is below an acknowledged success's. Count: jobs."""
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    if (undecidable := rows_undecidable(h, name)) is not None:
        return undecidable
    rows = job_rows(h)
    lines = []
    jobs = []
    first = None
    for j, execs in sorted(by_job(h.executions()).items()):
        execs = sorted(execs, key=lambda e: e.start)
        bad = None
        for i, ex in enumerate(execs):
            for prior in execs[:i]:
                acked = prior.outcome == "ok" and prior.end is not None and prior.end <= ex.start
                if ex.attempt < prior.attempt or (acked and ex.attempt <= prior.attempt):
                    what = "committed its success" if acked else "started"
                    bad = (f"job {j}'s attempt count went down: {who(prior)} {what} at "
                           f"+{prior.start - h.t0:.2f} s, then {who(ex)} started at +{ex.start - h.t0:.2f} s")
                    first = first or Mark(ex.start, "execution", ex.worker, j,
                                          f"job {j}: {who(ex)} started after {who(prior)} {what}",
                                          attempt=ex.attempt)
                    break
            if bad:
                break
        final = (rows.get(j) or {}).get("attempts")
        acked_max = max((e.attempt for e in execs if e.outcome == "ok"), default=None)
        if bad is None and isinstance(final, int) and acked_max is not None and final < acked_max:
            bad = f"job {j} ended with attempts {final}, below the {acked_max} of an acknowledged success"
            first = first or last_seen(h, j, f"job {j} ended with attempts {final}, below {acked_max}")
        if bad:
            lines.append(bad)
            jobs.append(j)
    if lines:
        return violated(name, lines, jobs, event=first)
    return held(name, "no job's attempt count went down" + (
        f" across {plural(len(h.promotions()), 'failover')}" if h.promotions() else ""))


@decides("failover-recovers", group="liveness", position=42)
def failover_recovers(h: History, name: str) -> Result:
    """Violated by every job that, after a failover, ended in a state no live worker owns (queued or
    running at the end: the run ended with it there, past the design's own recovery -- the run lasts
    until the queue is quiet, the deadline or a stall). Held with the time from each primary's stop to
    the first execution that started after it (the system's recovery). Vacuous without a failover."""
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    if (undecidable := rows_undecidable(h, name)) is not None:
        return undecidable
    stops = h.promotions()
    if not stops:
        return held(name, "vacuous: no failover struck")
    rows = job_rows(h)
    stuck = sorted(j for j, r in rows.items() if r.get("status") in ("queued", "running"))
    if stuck:
        return violated(name, [f"job {j} ended {rows[j]['status']} (attempts {rows[j].get('attempts')}) "
                               f"{h.t1 - stops[0]:.2f} s after the failover, owned by no live worker "
                               f"(the run ended {h.ended_by})" for j in stuck], stuck,
                        event=last_seen(h, stuck[0], f"job {stuck[0]} was left {rows[stuck[0]]['status']} "
                                                     "after the failover, owned by no live worker"))
    starts = sorted(e.start for e in h.executions())
    waits = [next((s - t for s in starts if s > t), None) for t in stops]
    told = ", ".join(f"{w:.2f} s" for w in waits if w is not None) or "none started after it"
    return held(name, f"every job ended done or dead; the first execution after each failover: {told}")


# This module's properties: left out of a run without a replica (properties.check).
REPLICA_ONLY = frozenset(n for n, p in REGISTRY.items() if p.check.__module__ == __name__)
