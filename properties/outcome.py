"""``done-means-committed``: a job the queue calls done was done by an execution whose work committed.

The execution log says what each execution did and how it ended; the final ``job_runs`` table says
which executions' finishing transactions committed (a row with ``finished`` set: the body writes it
in the transaction that finishes the job, or right before a hosted library's own finish). A design
that acknowledges a job before its work (at the claim) or in its error handler ends the job ``done``
with no such row: a crash or a raise then loses the job, and the table says done.

Judged on the commit, not the last log line: an error after the work committed (a lost commit reply,
a relay that died after it) is not a failure of the work.
"""

from __future__ import annotations

from ..core.events import EndedBy
from ..core.history import Execution, History
from .checks import by_job, job_rows, last_seen, plural, rows_undecidable
from .core import Result, decides, held, unknown, violated


def _ended(ex: Execution) -> str:
    if ex.outcome == "fail":
        return f"failed ({ex.error})" if ex.error else "failed"
    if ex.outcome == "ok":
        return "finished"
    return "did not end (its worker died or the run ended)"


@decides("done-means-committed", group="safety", position=13)
def done_means_committed(h: History, name: str) -> Result:
    """Violated by every job whose final status is ``done`` while no execution of it committed its
    work (no ``job_runs`` row with ``finished``), and by every ``done`` job whose newest execution (the
    highest attempt) failed before its work committed, after every execution that committed had ended
    (a failure acknowledged as done; a fenced execution rolled back and set nothing).
    Unknown when the final tables were not read. Count: jobs."""
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    bad_rows = rows_undecidable(h, name)
    if bad_rows is not None:
        return bad_rows
    committed: dict[int, set[tuple[str | None, int | None]]] = {}  # job -> (worker, attempt) of its rows
    for row in h.runs:
        if row.get("finished") is not None:
            committed.setdefault(row["job_id"], set()).add((row.get("worker"), row.get("attempt")))
    executions = by_job(h.executions())
    lines = []
    jobs = []
    done = [j for j, row in sorted(job_rows(h).items(), key=lambda kv: str(kv[0]))
            if row.get("status") == "done"]
    for j in done:
        mine = executions.get(j, [])
        ok = committed.get(j, set())
        if not ok:
            how = ("; ".join(f"{ex.worker} attempt {ex.attempt} {_ended(ex)}" for ex in mine)
                   or "it never started")
            lines.append(f"job {j} is done but no execution of it committed its work: {how}")
            jobs.append(j)
            continue
        # The newest claim (highest attempt; the last to end among equals): its finish or its error
        # handler set the final status -- unless a commit ended after it. A stale execution that fails
        # after a newer one committed (a paused worker waking up) changed nothing.
        last = max(mine, key=lambda ex: (ex.attempt, ex.end or ex.start)) if mine else None
        last_ok = max((ex.end or ex.start for ex in mine if (ex.worker, ex.attempt) in ok), default=None)
        if (last is not None and (last.worker, last.attempt) not in ok and last.outcome == "fail"
                and not last.fenced and last_ok is not None and (last.end or last.start) > last_ok):
            lines.append(f"job {j} is done after its last execution ({last.worker} attempt {last.attempt}) "
                         f"{_ended(last)} before its work committed: a failure acknowledged as done")
            jobs.append(j)
    if lines:
        return violated(name, lines, jobs,
                        event=last_seen(h, jobs[0], f"job {jobs[0]} is done with no committed work"))
    if not done:
        return held(name, "no job ended done")
    return held(name, f"{plural(len(done), 'done job')}: each done by an execution whose work committed")


@decides("transient-recovers", group="liveness", position=14)
def transient_recovers(h: History, name: str) -> Result:
    """Violated by every job whose fault was transient -- it struck only the job's first ``strikes``
    executions, fewer than the ``max_attempts`` it was enqueued with -- and that did not end ``done``:
    the design never retried it, or retried it into the wrong state. A job a supervisor fault also
    aims at is not judged; a run that ended before quiescence cannot decide for its jobs. Held
    vacuously when no job's fault is transient. Count: jobs."""
    limit = h.schedule.max_attempts
    # A job a supervisor fault aims at too is not judged (as progress leaves out a job with a fault).
    strikes = h.transient_strikes()
    transient = [j for j in h.schedule.jobs if j.id in strikes and limit and strikes[j.id] < limit]
    if not transient:
        return held(name, "vacuous: no job's fault was transient (and aimed at by no supervisor fault)")
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    if (undecidable := rows_undecidable(h, name)) is not None:
        return undecidable
    rows = job_rows(h)
    runs = {job: len(execs) for job, execs in by_job(h.executions()).items()}
    lines = []
    jobs = []
    undecided = []
    for j in transient:
        row = rows.get(j.id)
        status = row.get("status") if row else "missing"
        if status == "done":
            continue
        if h.ended_by != EndedBy.QUIESCENT:
            undecided.append(j.id)
            continue
        n = runs.get(j.id, 0)
        k = strikes[j.id]
        lines.append(f"job {j.id}'s {j.fault} struck only its first {plural(k, 'execution')} "
                     f"of {limit} attempts, yet it ended {status} after {plural(n, 'execution')}"
                     + (": the design never retried it" if n <= k else ""))
        jobs.append(j.id)
    if lines:
        status = (rows.get(jobs[0]) or {}).get("status") or "missing"
        return violated(name, lines, jobs, event=last_seen(
            h, jobs[0], f"job {jobs[0]}'s fault stopped striking, yet it ended {status}"))
    if undecided:
        return unknown(name, f"job {undecided[0]} did not end done and cannot decide it "
                             f"(the run ended: {h.ended_by})")
    return held(name, f"{plural(len(transient), 'job')} with a transient fault: each retried to done")
