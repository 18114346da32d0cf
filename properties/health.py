"""The liveness and resource properties: where jobs ended, what poison cost, what workers held.

Pure functions of a :class:`~core.history.History`, like the safety properties in
``properties/checks.py``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

from ..core.events import EndedBy, LogEvent, WorkerExitReason
from ..core.history import Clock, Execution, History
from ..faults.catalogue import entries
from .checks import end_of, job_rows, last_seen, limit_changes, max_attempts_of, plural, rows_undecidable
from .core import VIOLATED, Mark, Result, decides, held, not_judged, over_limits, unknown, violated

TERMINAL = ("done", "dead")

# A worker transaction holding an xid or a snapshot for more than this fraction of a lease is held
# *across* the job's work, not just around the claim or the finish (which take milliseconds): half a
# lease is far above any short transaction, and below an overrun (1.5 leases) or a slow job (0.75).
# The lease is the design's own (History.clock): the schedule's only where the harness sets it.
HORIZON_LEASE_FRACTION = 0.5

# Connections a worker may open beyond its pool size without a terminate fault: one reconnect after
# a connection the pool found broken (psycopg_pool replaces it).
RECONNECT_SLACK = 1

# How a run ended that a violation's evidence need not mention (any other end may explain the state).
_SAID = (EndedBy.QUIESCENT, EndedBy.UNKNOWN)


def stopped_by_themselves(h: History) -> str:
    """The workers of *h* that stopped by themselves (``stopped-by-itself``: ``run_worker`` returned with
    the dequeue budget not spent), each with what its log ended with, as a suffix for the evidence of a
    job left behind ("; w2.0 stopped by itself: ..."); empty when none did. Such a stop may explain it."""
    return "".join(f"; {x.worker} {x.told()}" for x in h.exits
                   if x.outcome == WorkerExitReason.STOPPED_BY_ITSELF)


@decides("progress", group="liveness", position=7)
def progress(h: History, name: str) -> Result:
    """Violated by every job that carries no fault (``History.job_faults``) and did not end
    ``done``; held vacuously when every job carries one. Count: jobs. The evidence names every worker
    that stopped by itself (:func:`stopped_by_themselves`)."""
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    if (undecidable := rows_undecidable(h, name)) is not None:
        return undecidable
    rows = job_rows(h)
    faults = h.job_faults()
    order = [j.id for j in h.schedule.jobs] or sorted(rows)
    order += [j for j in sorted(rows) if j not in order]
    clean = [j for j in order if j not in faults]
    if not clean:
        return held(name, "vacuous: every job carries a fault")
    lines = []
    jobs = []
    for job in clean:
        row = rows.get(job)
        status = row.get("status") if row else None
        if status == "done":
            continue
        ended = f"ended {status}" if row else "is missing from the jobs table"
        ahead = [j for j in order[:order.index(job)] if j in faults]
        after = f" after job {ahead[0]}'s fault" if ahead else ""
        lines.append(f"job {job} (no fault) {ended}{after}")
        jobs.append(job)
    if lines:
        if h.ended_by not in _SAID:
            lines[0] += f" (the run ended: {h.ended_by})"
        row = rows.get(jobs[0])
        ended = f"ended {row.get('status')}" if row else "is missing from the jobs table"
        return violated(name, lines, jobs, suffix=stopped_by_themselves(h),
                        event=last_seen(h, jobs[0], f"job {jobs[0]} (no fault) made no progress and {ended}"))
    return held(name, f"all {plural(len(clean), 'job')} without a fault ended done")


@decides("terminal-states", group="liveness", position=8)
def terminal_states(h: History, name: str) -> Result:
    """Violated by every job not ``done`` or ``dead`` at the end (worst: ``running`` with an expired
    lease, which nothing will pick up). Count: jobs. The evidence names every worker that stopped by
    itself (:func:`stopped_by_themselves`)."""
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    if (undecidable := rows_undecidable(h, name)) is not None:
        return undecidable
    lines = []
    jobs = []
    for row in sorted(h.jobs, key=lambda r: r["id"]):
        status = row.get("status")
        if status in TERMINAL:
            continue
        if status == "running":
            how = "stuck running with an expired lease" if row.get("lease_expired") else "still running"
        else:
            how = f"ended {status}"
        lines.append(f"job {row['id']} {how}, attempts {row.get('attempts')}")
        jobs.append(row["id"])
    if lines:
        if h.ended_by not in _SAID:  # say how the run ended: it may explain the state
            lines[0] += f" (the run ended: {h.ended_by})"
        stuck = job_rows(h)[jobs[0]]
        return violated(name, lines, jobs, suffix=stopped_by_themselves(h),
                        event=last_seen(h, jobs[0], f"job {jobs[0]} was left {stuck.get('status')}"))
    counts = Counter(row.get("status") for row in h.jobs)
    return held(name, ", ".join(f"{counts[s]} {s}" for s in TERMINAL if counts[s]))


@decides("bounded-blast-radius", group="liveness", position=9)
def bounded_blast_radius(h: History, name: str) -> Result:
    """Violated by every job in flight when more than its configured ``max_attempts`` worker processes died
    (a transient fault's job: more than its ``strikes``)
    (``WorkerExit.died``: not ended by the harness, nor at its asking -- a worker that stopped by itself
    during a job counts). Count: jobs. Unknown when no worker exit was recorded at all."""
    if not h.exits:
        return unknown(name, "no worker exit was recorded")
    deaths: Counter[int] = Counter(x.job for x in h.exits if x.died and x.job is not None)
    if not deaths:
        return held(name, "vacuous: no worker died during a job")
    # A transient fault (strikes K) kills at most K workers, unless a supervisor fault aims at the job too.
    strikes = h.transient_strikes()

    def limit(job: int) -> int | None:
        most = max_attempts_of(h, job)
        return min(most, strikes[job]) if most is not None and job in strikes else most

    def line(job: int, n: int, most: int) -> str:
        killed = f"job {job} killed {plural(n, 'worker process', 'worker processes')}"
        if job in strikes and most == strikes[job] and most < (max_attempts_of(h, job) or 0):
            return f"{killed} (its transient fault strikes only {plural(most, 'execution')})"
        return f"{killed} (max_attempts {most})"

    lines, jobs, missing = over_limits(deaths, limit, line)
    if lines:
        return violated(name, lines, jobs, suffix=limit_changes(h, jobs, job_rows(h)),
                        event=_death(h, jobs[0], limit(jobs[0]) or 0))
    if missing:
        return unknown(name, f"the schedule gives no max_attempts (job {missing[0]})")
    return held(name, f"{plural(sum(deaths.values()), 'worker death')} during jobs, "
                      "none beyond max_attempts per job")


def _death(h: History, job: int, most: int) -> Mark | None:
    """The event bounded-blast-radius names: the death of the worker process number *most* + 1 that
    *job* took with it."""
    died = sorted((x for x in h.exits if x.died and x.job == job), key=lambda x: x.t)
    if len(died) <= most:
        return None
    x = died[most]
    return Mark(x.t, "death", x.worker, job,
                f"job {job} killed worker process {most + 1} ({x.worker}: {x.told()}), "
                f"past its limit of {most}",
                attempt=x.attempt)


class Threshold(NamedTuple):
    """The horizon threshold of a history: real seconds (None: none to judge by), the lease it is half
    of in words (or why there is none), and whether a missing one is the design's (``judged`` False)."""

    seconds: float | None
    lease: str
    judged: bool = True


def horizon_threshold(h: History) -> Threshold:
    """:data:`HORIZON_LEASE_FRACTION` of the design's lease (``History.clock``: the schedule's for a
    built-in design, the library's own interval for a hosted one); none for a design without a lease
    the harness knows. A history that does not record its clock: a built-in design's lease is the
    schedule's; a hosted one's is not known."""
    clock = h.clock
    if clock is None:
        if h.hosted:
            return Threshold(None, "the history does not record the design's lease (saved before it was)")
        lease = h.schedule.timing.lease
        if lease is None:
            return Threshold(None, "the schedule gives no timing.lease")
        clock = Clock(h.schedule.seconds(lease), "schedule", "the schedule's lease")
    if clock.seconds is None:
        return Threshold(None, clock.what, judged=False)
    seconds = float(clock.seconds)
    whose = "" if clock.basis == "schedule" else f", half of {clock.what} ({seconds:g} s)"
    return Threshold(HORIZON_LEASE_FRACTION * seconds, whose)


@decides("horizon", group="resources", position=10)
def horizon(h: History, name: str) -> Result:
    """Violated by every worker session (pid) sampled holding an xid or a snapshot for longer than
    :func:`horizon_threshold` (half the design's own lease); not judged, with the longest such
    transaction sampled as a figure, for a design without a lease the harness knows; unknown when no
    worker session was sampled (saying why). A session whose worker had died when it was sampled (a
    crash inside a transaction: ``History.death_times``) counts only until the death: what follows is
    the server's, which ends the dead client's session once it reads the closed socket -- tens of ms
    on a busy machine, more than a short transaction's whole life at a small time scale (issue 51).
    Count: sessions; jobs: those the session's worker was running when sampled."""
    samples = [s for s in h.samples if s.get("role") == "worker"]
    threshold = horizon_threshold(h)
    deaths = h.death_times()  # of the workers that died: not those the harness ended, nor asked to stop
    died = {x.worker: deaths[x.worker] for x in h.exits if x.died}
    holding = [_designs_share(s, died) for s in samples
               if (s.get("xid") is not None or s.get("xmin") is not None) and s.get("xact_age") is not None]
    if threshold.seconds is None:
        if not samples:
            figure = _unsampled(h)
        elif not holding:
            figure = f"{plural(len(samples), 'worker sample')}, none in a transaction with an xid or snapshot"
        else:
            figure = "the longest worker transaction sampled: " + _longest(h, holding)
        why = f"{figure}; no verdict: {threshold.lease}"
        return unknown(name, why) if threshold.judged else not_judged(name, why)
    if not samples:
        return unknown(name, _unsampled(h))
    limit = threshold.seconds
    held_back = [s for s in holding if s["xact_age"] > limit]
    if not held_back:
        orphans = sum(1 for s in holding if s.get("after_death") and s["sampled_age"] > limit)
        dead = (f"; {plural(orphans, 'sample')} of a dead worker's session over it, counted to the "
                "worker's death (the server had yet to end the session)") if orphans else ""
        return held(name, f"{plural(len(samples), 'worker sample')}: no transaction with an xid or "
                          f"snapshot older than {limit:.2f} s{threshold.lease}{dead}")
    pids = {s.get("pid") for s in held_back}
    evidence = f"{_longest(h, held_back)} (threshold {limit:.2f} s{threshold.lease})"
    if len(pids) > 1:
        evidence += f"; {len(pids)} worker sessions in all"
    executions = h.executions()
    jobs = (_job_at(h, executions, s) for s in held_back)
    return Result(name, VIOLATED, len(pids), tuple(j for j in jobs if j is not None), evidence,
                  event=_holding(h, executions, held_back))


def _holding(h: History, executions: list[Execution], held_back: list[dict[str, Any]]) -> Mark:
    """The event horizon names: the longest-open transaction sampled, a span from its start to the sample
    (to the worker's death, for a dead worker's session)."""
    s = max(held_back, key=lambda s: s["xact_age"])
    t = s.get("judged_at", s["t"])
    job = _job_at(h, executions, s)
    what = "an xid" if s.get("xid") is not None else "a snapshot"
    during = f" during job {job}" if job is not None else ""
    ex = next((e for e in executions if e.job == job and e.worker == (s.get("app") or "").split("/")[0]
               and e.start <= t <= end_of(h, e)), None)
    return Mark(t, "transaction", (s.get("app") or "").split("/")[0], job,
                f"{s.get('app')} held a transaction with {what} open {s['xact_age']:.2f} s{during}, "
                "holding back VACUUM's horizon", attempt=ex.attempt if ex else None, since=t - s["xact_age"])


def _pool_event(h: History, greedy: dict[str, int], broken: list[dict[str, Any]], pool: int | None) -> Mark:
    """The event pool-hygiene names: the first prepared-statement error, else the first greedy worker's
    last connect (the one that took it past its pool)."""
    if broken:
        r = broken[0]
        return Mark(r["t"], "error", r.get("worker") or "", r.get("job"),
                    f"{r.get('worker')}: prepared-statement error: {r.get('error')}",
                    attempt=r.get("attempt"))
    w, n = next(iter(greedy.items()))
    worker = w.split("[")[0].split("/")[0]  # "w1.0[pid 7]/heartbeat": its worker's lane
    connects = [r["t"] for r in h.records if r.get("event") == LogEvent.CONNECT and r.get("worker") == worker]
    return Mark(max(connects, default=h.t1), "connect", worker, None,
                f"{w} opened its connection number {n}, for a pool of {pool}")


def _designs_share(sample: dict[str, Any], died: dict[str, float]) -> dict[str, Any]:
    """*sample* with its transaction's age counted until its worker died, when it was sampled after
    (``after_death``; ``sampled_age`` keeps what the server said). The transaction started at
    ``t - xact_age`` on the one monotonic clock the records and the samples share."""
    worker = (sample.get("app") or "").split("/")[0]
    death = died.get(worker)
    if death is None or sample["t"] <= death:
        return sample
    return {**sample, "xact_age": max(0.0, sample["xact_age"] - (sample["t"] - death)),
            "sampled_age": sample["xact_age"], "after_death": True, "judged_at": death}


def _longest(h: History, samples: list[dict[str, Any]]) -> str:
    """The longest-open transaction among *samples*, in words: whose, holding what, how long, during
    which job."""
    longest = max(samples, key=lambda s: s["xact_age"])
    what = "an xid" if longest.get("xid") is not None else "a snapshot"
    job = _job_at(h, h.executions(), longest)
    during = f" during job {job}" if job is not None else ""
    until = " until its worker died" if longest.get("after_death") else ""
    return (f"{longest.get('app')} held a transaction with {what} open for {longest['xact_age']:.2f} s"
            f"{until}{during}")


def _unsampled(h: History) -> str:
    """Why no worker session was sampled, and what would let the property decide: the supervisor samples
    ``pg_stat_activity`` four times a lease and counts a session as a worker's by its application_name
    (``w1.0``, ``w1.0/purpose``: each worker process sets ``PGAPPNAME`` to its identity)."""
    said = "no worker session was sampled in pg_stat_activity (one named after a worker: w1.0, w1.0/purpose)"
    failed = next((n for n in h.notes if "sampling pg_stat_activity failed" in n), None)
    if failed is not None:
        return f"{said}: the supervisor's sampling failed ({failed})"
    names = sorted({str(s.get("app")) for s in h.samples if s.get("role") == "other" and s.get("app")})
    if names:
        more = f" (and {len(names) - 3} more)" if len(names) > 3 else ""
        return (f"{said}: the sessions sampled were named {', '.join(names[:3])}{more} -- the design's "
                "connections name themselves; leave application_name unset (the worker's PGAPPNAME names "
                "them) or name them ctx.identity or f'{ctx.identity}/purpose' to have them judged")
    return (f"{said}: the run lasted {h.t1 - h.t0:.2f} s and no worker connection was open at a sample "
            "(sampled four times a lease): a run whose jobs last longer would be sampled")


def _job_at(h: History, executions: list[Execution], sample: dict[str, Any]) -> int | None:
    """The job the sampled session's worker was executing at the sample's time, if any."""
    worker = (sample.get("app") or "").split("/")[0]  # a heartbeat connection is "w1.0/heartbeat"
    t = sample.get("judged_at", sample["t"])  # a dead worker's session: when it died
    for ex in executions:
        if ex.worker == worker and ex.start <= t <= end_of(h, ex):
            return ex.job
    return None


@decides("pool-hygiene", group="resources", position=11)
def pool_hygiene(h: History, name: str) -> Result:
    """Violated by every worker that opened more than ``pool_size`` + :data:`RECONNECT_SLACK` +
    (terminate and lost-commit-reply faults aimed at it) + (sessions the server cut, per its
    ``session-cut`` records) + (server restarts: each breaks every connection) connections, and by every
    record whose error mentions a prepared statement. Count: such workers plus such records. Unknown when
    no connection was recorded (and no prepared-statement error); not judged when the jobs ran on the
    worker's own connections (``run_job(..., conn=)``), whose pool size the harness does not know."""
    # A connection of the worker's own (the heartbeat's, "purpose") has a budget of one per purpose,
    # like a pool of one: counted under "<worker>/<purpose>".
    # A child process the library spawned to run jobs in (chancy's process executor) has a pool of
    # its own (workers/hosted/spawned.py): counted under "<worker>[pid N]".
    children = {r.get("pid") for r in h.records if r.get("event") == LogEvent.SPAWNED_CHILD}
    connects = Counter(r["worker"] + (f"[pid {r['pid']}]" if r.get("pid") in children else "")
                       + (f"/{r['purpose']}" if r.get("purpose") else "")
                       for r in h.records if r.get("event") == LogEvent.CONNECT)
    # A session the server cut (a design's own timeouts, logged "session-cut") is a terminate the
    # design chose: its reconnect is budgeted the same way.
    # A lost-commit-reply cuts the one connection it strikes, as a terminate does.
    cutting = ("terminate", "lost-commit-reply")
    terminated = Counter(i.get("worker") for i in h.injected if i.get("fault") in cutting)
    terminated.update(r.get("worker") for r in h.records if r.get("event") == LogEvent.SESSION_CUT)
    # faults whose catalogue entry breaks every session (restarts), each breaking every connection
    restarts = sum(f.breaks_every_session for f in entries(i.get("fault") for i in h.injected))
    pool = h.schedule.pool_size
    greedy = {}
    if pool is not None:
        greedy = {w: n for w, n in sorted(connects.items(), key=lambda kv: str(kv[0]))
                  if n > (1 if "/" in w else pool) + RECONNECT_SLACK + terminated[w.split("/")[0]] + restarts}
    broken = sorted((r for r in h.records if "prepared statement" in str(r.get("error") or "").lower()),
                    key=lambda r: r["t"])
    if greedy or broken:
        lines = [f"{w} opened {n} connections for a pool of {pool}" if "/" not in w else
                 f"{w} opened {n} connections where one would do" for w, n in greedy.items()]
        if broken:
            first = broken[0]
            lines.append(f"{plural(len(broken), 'prepared-statement error')}, the first "
                         f"({first.get('event')} on {first.get('worker')}): {first.get('error')}")
        evidence = "; ".join(lines[:2]) + (f" (and {len(lines) - 2} more)" if len(lines) > 2 else "")
        return Result(name, VIOLATED, len(greedy) + len(broken),
                      tuple(r["job"] for r in broken if r.get("job") is not None), evidence,
                      event=_pool_event(h, greedy, broken, pool))
    if not connects:
        if any(r.get("own_tenant") for r in h.records if r.get("event") == LogEvent.STARTED):
            return not_judged(name, "the jobs ran on the worker's own connections, whose pool size the "
                                    "harness does not know: no connection was counted")
        return unknown(name, "no connection was recorded")
    if pool is None:
        return unknown(name, "the schedule gives no pool_size")
    return held(name, f"{plural(len(connects), 'worker')} opened at most {max(connects.values())} "
                      f"connections each for a pool of {pool}; no prepared-statement errors")
