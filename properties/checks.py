"""The safety properties: what each execution saw and did, and how the tables counted it.

Each is a pure function of a :class:`~core.history.History` returning a
:class:`~properties.core.Result`. They decide from the execution log (the world, which no
rollback takes back) against the final ``jobs`` and ``job_runs`` tables. The effect
properties are in ``properties/effects.py``, the liveness and resource properties in
``properties/health.py``.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from itertools import combinations
from typing import Any

from ..core.history import JOB_STATES, Execution, History
from .core import Mark, Result, decides, held, over_limits, unknown, violated

# --- helpers shared with health.py ------------------------------------------------------------------


def job_rows(h: History) -> dict[int, dict[str, Any]]:
    """The final ``jobs`` table by job id."""
    return {row["id"]: row for row in h.jobs}


def rows_undecidable(h: History, name: str) -> Result | None:
    """``unknown`` when the final jobs table says what the protocol cannot read: a status outside
    :data:`~core.history.JOB_STATES` (a hosted library's status its adapter did not map) or attempts
    that are not a count. None when every row is readable."""
    for row in sorted(h.jobs, key=lambda r: str(r.get("id"))):
        status = row.get("status")
        attempts = row.get("attempts")
        if status not in JOB_STATES:
            return unknown(name, f"job {row.get('id')} has status {status!r}, not one of "
                                 f"{', '.join(JOB_STATES)} (the design's final_states did not map it)")
        not_count = not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 0
        if attempts is not None and not_count:
            return unknown(name, f"job {row.get('id')} has attempts {attempts!r}, not a count")
    return None


def by_job(executions: list[Execution]) -> dict[int, list[Execution]]:
    out: dict[int, list[Execution]] = defaultdict(list)
    for ex in executions:
        out[ex.job].append(ex)
    return dict(out)


def max_attempts_of(h: History, job: int) -> int | None:
    """The ``max_attempts`` the job was enqueued with: the schedule's, the configuration. Never the
    jobs row's, which the design under test may change (None when the schedule's is not a number)."""
    value = h.schedule.max_attempts
    return value if isinstance(value, int) else None


def limit_changes(h: History, jobs: list[int], rows: dict[int, dict[str, Any]]) -> str:
    """Evidence for a design that changed a job's limit: "; max_attempts raised from 3 to 5 by the
    design (job 1)" -- empty when every offending job's row still says what it was enqueued with."""
    changed: dict[tuple[int, int], list[int]] = defaultdict(list)
    for job in jobs:
        configured = max_attempts_of(h, job)
        row = (rows.get(job) or {}).get("max_attempts")
        if configured is not None and isinstance(row, int) and row != configured:
            changed[(configured, row)].append(job)
    return "".join(f"; max_attempts {'raised' if new > old else 'lowered'} from {old} to {new} by the design "
                   f"({'job' if len(js) == 1 else 'jobs'} {', '.join(map(str, js))})"
                   for (old, new), js in sorted(changed.items()))


def server_time(text: str) -> datetime:
    """A server time the history keeps as ISO text (the status log's, a job_runs row's)."""
    return datetime.fromisoformat(text)


def on_clock(h: History, at: datetime) -> float | None:
    """A server time on the history's clock (``time.monotonic()``), through a record's own ``wall`` --
    the same machine's clock, so good to a few milliseconds; None without such a record."""
    rec = next((r for r in h.records if r.get("wall") is not None), None)
    return None if rec is None else at.timestamp() + rec["t"] - rec["wall"]


def end_of(h: History, ex: Execution) -> float:
    return ex.end if ex.end is not None else h.t1


def overlap(h: History, a: Execution, b: Execution) -> float:
    """Seconds during which both executions were live ([start, end) intervals); 0 when apart."""
    return max(0.0, min(end_of(h, a), end_of(h, b)) - max(a.start, b.start))


def who(ex: Execution) -> str:
    return f"{ex.worker} attempt {ex.attempt}"


def plural(n: int, word: str, words: str | None = None) -> str:
    """ "1 job", "2 jobs"; *words* for an irregular plural."""
    return f"{n} {word}" if n == 1 else f"{n} {words or word + 's'}"


# --- the properties ---------------------------------------------------------------------------------

def _second_commit(h: History, job: int) -> Mark | None:
    """The event single-commit names: the job's second ``job_runs`` row's commit (its ``finished``)."""
    rows = sorted((r for r in h.runs if r["job_id"] == job and r.get("finished")),
                  key=lambda r: r["finished"])
    t = on_clock(h, server_time(rows[1]["finished"])) if len(rows) > 1 else None
    return None if t is None else Mark(t, "commit", rows[1].get("worker") or "", job,
                                       f"job {job}'s second job_runs row committed ({rows[1].get('worker')} "
                                       f"attempt {rows[1].get('attempt')})",
                                       attempt=rows[1].get("attempt"))


@decides("single-commit", group="safety", position=2)
def single_commit(h: History, name: str) -> Result:
    """Violated by every job with more than one committed ``job_runs`` row. Count: jobs."""
    if not h.jobs and not h.runs:
        return unknown(name, "the final jobs and job_runs tables were not read")
    attempts: dict[int, list[object]] = defaultdict(list)
    for row in h.runs:
        attempts[row["job_id"]].append(row.get("attempt"))
    bad = {j: a for j, a in sorted(attempts.items()) if len(a) > 1}
    if bad:
        return violated(name, [f"job {j} committed {len(a)} job_runs rows (attempts "
                               f"{', '.join(str(x) for x in a)})" for j, a in bad.items()], bad,
                        event=_second_commit(h, next(iter(bad))))
    return held(name, f"{plural(len(h.runs), 'job_runs row')}, at most one per job")


@decides("no-overlap", group="safety", position=3)
def no_overlap(h: History, name: str) -> Result:
    """Violated by every pair of executions of one job that were live at the same time (an
    execution with no end is live until the run ended). Count: overlapping pairs."""
    lines = []
    jobs = []
    first = None
    repeated = 0
    for job, execs in sorted(by_job(h.executions()).items()):
        repeated += len(execs) > 1
        for a, b in combinations(sorted(execs, key=lambda e: e.start), 2):
            both = overlap(h, a, b)
            if both > 0:
                lines.append(f"job {job}: {who(a)} and {who(b)} ran at once for {both:.2f} s")
                jobs.append(job)
                # the event: the later execution's start, while the earlier was still live
                first = first or Mark(b.start, "execution", b.worker, job,
                                      f"job {job}: {who(b)} started while {who(a)} still ran",
                                      attempt=b.attempt)
    if lines:
        return violated(name, lines, jobs, event=first)
    if not repeated:
        return held(name, "vacuous: no job executed more than once")
    return held(name, f"{plural(repeated, 'job')} executed more than once, never two executions at once")


def beyond(h: History, job: int, n: int, what: str) -> Mark | None:
    """The event a count's violation names: the start of *job*'s execution number *n* + 1 (by start), the
    first one past the count *n*; *what* says what it is."""
    execs = sorted(by_job(h.executions()).get(job, []), key=lambda e: e.start)
    if len(execs) <= n:
        return None
    ex = execs[n]
    return Mark(ex.start, "execution", ex.worker, job, f"job {job}: {who(ex)} started, {what}",
                attempt=ex.attempt)


def last_seen(h: History, job: int, what: str, kind: str = "job") -> Mark:
    """The event a job's end state names (it made no progress, it ended stuck): its last execution's end
    (its start, when it has none), or the run's end when it never started; *what* says what it is."""
    execs = by_job(h.executions()).get(job, [])
    if not execs:
        return Mark(h.t1, kind, "", job, f"{what}: it never started")
    ex = max(execs, key=lambda e: e.end if e.end is not None else e.start)
    t = ex.end if ex.end is not None else ex.start
    return Mark(t, kind, ex.worker, job, f"{what}: its last execution was {who(ex)}", attempt=ex.attempt)


@decides("attempts-counted", group="safety", position=5)
def attempts_counted(h: History, name: str) -> Result:
    """Violated by every job that executed (per the execution log) more times than ``jobs.attempts``
    counts; unknown when the jobs table was not read or lacks an executed job. Count: jobs."""
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    if (undecidable := rows_undecidable(h, name)) is not None:
        return undecidable
    rows = job_rows(h)
    groups = by_job(h.executions())
    lines, jobs, missing = over_limits(
        {job: len(execs) for job, execs in groups.items()}, lambda job: (rows.get(job) or {}).get("attempts"),
        lambda job, n, counted: f"job {job} executed {plural(n, 'time')}, counted {plural(counted, 'time')}")
    if lines:
        counted = rows[jobs[0]]["attempts"]
        past = f"execution {counted + 1}, past the {plural(counted, 'attempt')} jobs.attempts counts"
        return violated(name, lines, jobs, event=beyond(h, jobs[0], counted, past))
    if missing:
        return unknown(name, f"job {missing[0]} executed but has no attempts in the jobs table")
    if not groups:
        return held(name, "vacuous: no execution started")
    return held(name, f"every execution of {plural(len(groups), 'job')} was counted")


@decides("bounded-attempts", group="safety", position=6)
def bounded_attempts(h: History, name: str) -> Result:
    """Violated by every job that executed more times than the ``max_attempts`` it was enqueued
    with (the schedule's; a design that raises the column does not raise the limit, and the
    evidence says it did). Count: jobs."""
    groups = by_job(h.executions())
    lines, jobs, missing = over_limits(
        {job: len(execs) for job, execs in groups.items()}, lambda job: max_attempts_of(h, job),
        lambda job, n, limit: f"job {job} executed {plural(n, 'time')} (max_attempts {limit})")
    if lines:
        most = max_attempts_of(h, jobs[0]) or 0
        return violated(name, lines, jobs, suffix=limit_changes(h, jobs, job_rows(h)), event=beyond(
            h, jobs[0], most, f"execution {most + 1}, past max_attempts {most}"))
    if missing:
        return unknown(name, f"the schedule gives no max_attempts (job {missing[0]})")
    if not groups:
        return held(name, "vacuous: no execution started")
    most = max(len(execs) for execs in groups.values())
    return held(name, f"at most {plural(most, 'execution')} per job, within max_attempts")
