"""``success-final``: once a job's success has committed, the job stays done.

A job's success has committed when both its ``job_runs`` row (``finished`` set) and its ``done`` have
committed -- whichever the design commits last. From then on the job must never be seen ``queued``,
``running``, ``failed`` or ``dead`` again, and no execution of it may start: a maintenance step that
writes back rows it read before the finish (a sweep without compare-and-set), an error handler that runs
after the finish committed (a late failure) or a failover can each turn a finished job back, and
``progress`` leaves out a job with a fault while ``single-commit`` sees only a second commit.

Judged from three records: the jobs table's committed status changes (``History.transitions``, a trigger
on the harness's ``jobs``: ``harness/postgres/transitions.py``), which name the statement that made each
change; the final table; and the execution log (an execution that started after the committing one
ended). A hosted library's statuses are not in that table: it is judged from the library's own record of
what it accepted (``History.finishes``, dated on the execution log's clock) -- a failure or requeue it
took after a success, an execution after that success, a final status other than done -- and is unknown
where the library keeps no such record.
"""

from __future__ import annotations

from typing import Any

from ..core.events import LogEvent
from ..core.history import Execution, History
from .checks import by_job, job_rows, on_clock, plural, rows_undecidable, server_time, who
from .core import Mark, Result, decides, held, not_judged, unknown, violated


def _statement(change: dict[str, object]) -> str:
    query = " ".join(str(change.get("query") or "").split())
    return f"`{query[:160]}`" if query else "a statement the log did not keep"


def _again_mark(job: int, execs: list[Execution], after: float) -> Mark | None:
    """The event :func:`_again` names: the start of the first execution after *after*."""
    later = sorted((o for o in execs if o.start > after), key=lambda o: o.start)
    return (Mark(later[0].start, "execution", later[0].worker, job,
                 f"job {job} executed again after its success: {who(later[0])}", attempt=later[0].attempt)
            if later else None)


def _again(job: int, ex: Execution | None, execs: list[Execution], after: float) -> list[str]:
    """A line for the first execution of *job* other than *ex* that started after *after*."""
    later = sorted((o for o in execs if o is not ex and o.start > after), key=lambda o: o.start)
    if not later:
        return []
    first = later[0]
    by = f" (its success: {who(ex)})" if ex is not None else ""
    return [f"job {job} was executed again after its success committed{by}: {who(first)} started "
            f"{(first.start - after) * 1000:.0f} ms later" + (f", {len(later) - 1} more after it"
                                                            if len(later) > 1 else "")]


def _wall(h: History, ex: Execution, event: LogEvent) -> float | None:
    """The wall-clock time of *ex*'s *event* record (the execution log's ``wall``: the server's clock
    on this machine), to set beside the status log's times."""
    for r in h.records:
        if (r.get("event"), r.get("worker"), r.get("job"), r.get("attempt")) == (event, ex.worker, ex.job,
                                                                                ex.attempt) \
                and abs(r.get("t", 0.0) - (ex.end if event == LogEvent.FINISHED else ex.start)) < 1e-6:
            return r.get("wall")
    return None


def acknowledged_lost(h: History) -> tuple[list[str], list[int]]:
    """Jobs whose success the worker saw acknowledged (its ``finished`` record: the commit returned)
    and that ran again, while the status log has no ``done`` between the two: the commit was lost (a
    failover of a lagging standby) -- a line naming the commit, what the table held instead and the
    run that followed. A done that survived and was turned back is :func:`_table`'s to tell."""
    # a failover's primary stopped (faults/failover.py): the standby's promotion follows it
    promoted = h.promotions()
    changes: dict[int, list[dict[str, Any]]] = {}
    for c in h.transitions or ():
        changes.setdefault(c["job_id"], []).append(c)
    lines = []
    jobs = []
    for j, execs in sorted(by_job(h.executions()).items()):
        acked = sorted((e for e in execs if e.outcome == "ok" and e.end is not None),
                       key=lambda e: e.end or 0.0)
        if not acked:
            continue
        ack = acked[0]
        assert ack.end is not None
        later = sorted((e for e in execs if e is not ack and e.start > ack.end), key=lambda e: e.start)
        if not later:
            continue
        again = later[0]
        done_at = _wall(h, ack, LogEvent.FINISHED)
        again_at = _wall(h, again, LogEvent.STARTED)
        log = sorted(changes.get(j, ()), key=lambda c: c["seq"])
        before = [c for c in log if again_at is None or server_time(c["at"]).timestamp() < again_at]
        if any(c["status"] == "done" and (done_at is None or server_time(c["at"]).timestamp() >= done_at - 1)
               for c in before):
            continue  # the done committed and stayed in the log: _table names what turned it back
        failed_over = any(ack.end < t < again.start for t in promoted)
        where = " on the old primary" if failed_over else ""
        table = "the new primary" if failed_over else "the jobs table"
        state = (f"{table} has it {before[-1]['status']} (attempts {before[-1].get('attempts')})" if before
                 else f"{table}'s status log has no done of it")
        lines.append(f"job {j}'s done committed{where} at +{ack.end - h.t0:.2f} s, acknowledged "
                     f"({who(ack)}); {state}; it ran again at +{again.start - h.t0:.2f} s ({who(again)})"
                     + (f", {len(later) - 1} more after it" if len(later) > 1 else ""))
        jobs.append(j)
    return lines, jobs


def _lost_mark(h: History, job: int) -> Mark | None:
    """The event :func:`acknowledged_lost` names: the acknowledged commit of *job*'s first success, on the
    execution (worker, session) that saw it acknowledged; where a failover's primary stopped between it
    and the run that followed, it says so: the node that acknowledged it was the old primary."""
    execs = sorted((e for e in h.executions() if e.job == job), key=lambda e: e.start)
    acked = sorted((e for e in execs if e.outcome == "ok" and e.end is not None), key=lambda e: e.end or 0.0)
    ack = acked[0] if acked else None
    if ack is None or ack.end is None:
        return None
    end = ack.end
    again = next((e for e in execs if e is not ack and e.start > end), None)
    stop = next((t for t in h.promotions() if again is not None and end < t < again.start), None)
    if stop is None:
        what = f"job {job}'s done, committed and acknowledged ({who(ack)}), was lost: the job ran again"
    else:
        what = (f"job {job}'s done, committed and acknowledged on the old primary ({who(ack)}), was lost "
                f"when that primary stopped at +{stop - h.t0:.2f} s: the job ran again on the new one")
    return Mark(end, "commit", ack.worker, job, what, attempt=ack.attempt)


def _table(h: History, name: str, done: dict[int, dict[str, Any]]) -> Result:
    """A design on the harness's jobs table: its committed status changes against its job_runs rows;
    first the successes the workers saw acknowledged that were lost (:func:`acknowledged_lost`)."""
    lost_lines, lost_jobs = acknowledged_lost(h)
    changes: dict[int, list[dict[str, Any]]] = {}
    for c in h.transitions or ():
        changes.setdefault(c["job_id"], []).append(c)
    missing = [j for j in done if j not in changes and j not in lost_jobs]
    if missing:
        return not_judged(name, f"job {missing[0]} committed a success but the harness's jobs table logged "
                                "no status of it: the design keeps its queue in a table of its own, whose "
                                "changes nobody records")
    rows = job_rows(h)
    executions = by_job(h.executions())
    lines = list(lost_lines)
    jobs = list(lost_jobs)
    first = _lost_mark(h, lost_jobs[0]) if lost_jobs else None
    for j, run in sorted(done.items()):
        if j in lost_jobs:
            continue
        log = sorted(changes[j], key=lambda c: c["seq"])
        first_done = next((c for c in log if c["status"] == "done"), None)
        if first_done is None:  # its row committed, its done never did: nothing was final yet
            continue
        # committed when both had: the later of the done and the job_runs row
        final_at = max(server_time(first_done["at"]), server_time(run["finished"]))
        after = [c for c in log if c["seq"] > first_done["seq"] and server_time(c["at"]) >= final_at]
        undone = [c for c in after if c["status"] != "done"]
        mine = executions.get(j, [])
        # the execution that committed it: its worker and attempt, the one that finished among several (a
        # design that counts the attempt in the work transaction repeats the number after a rollback)
        same = [e for e in mine if (e.worker, e.attempt) == (run.get("worker"), run.get("attempt"))]
        ex = next((e for e in same if e.outcome == "ok"), same[-1] if same else None)
        if undone:
            c = undone[0]
            ms = (server_time(c["at"]) - final_at).total_seconds() * 1000
            lines.append(f"job {j}'s success committed ({run.get('worker')} attempt {run.get('attempt')}), "
                         f"then it went {c.get('old')} -> {c['status']} {ms:.0f} ms later (attempts "
                         f"{c.get('attempts')}, session {c.get('backend')}) by {_statement(c)}"
                         + (f"; {len(rest)} more change(s) after it" if (rest := after[after.index(c) + 1:])
                            else ""))
            jobs.append(j)
            t = on_clock(h, server_time(c["at"]))
            if first is None and t is not None:
                first = Mark(t, "status change", "", j, f"job {j} went {c.get('old')} -> {c['status']} "
                                                        f"after its success committed")
            continue
        status = (rows.get(j) or {}).get("status")
        if status != "done":
            lines.append(f"job {j}'s success committed ({run.get('worker')} attempt {run.get('attempt')}) "
                         f"but it ended {status}")
            jobs.append(j)
            t = on_clock(h, server_time(run["finished"]))
            if first is None and t is not None:
                by = f"{run.get('worker')} attempt {run.get('attempt')}"
                first = Mark(t, "commit", run.get("worker") or "", j,
                             f"job {j}'s success committed ({by}), yet it ended {status}",
                             attempt=run.get("attempt"))
            continue
        if ex is not None and ex.end is not None:
            again = _again(j, ex, mine, ex.end)
            lines += again
            jobs += [j] * bool(again)
            if again and first is None:
                first = _again_mark(j, [e for e in mine if e is not ex], ex.end)
    if lines:
        return violated(name, lines, jobs, event=first)
    if not done:
        return held(name, "vacuous: no job's success committed")
    return held(name, f"{plural(len(done), 'job')} whose success committed: each stayed done, "
                      f"executed no more ({plural(len(h.transitions or ()), 'status change')} logged)")


def _library(h: History, name: str) -> Result:
    """A hosted library: its own record of the finishes it accepted."""
    lib = h.design
    if h.finishes is None:
        return not_judged(name, f"{lib} keeps its job statuses in its own tables, which log no changes, "
                                "and its design does not say what it accepted: implement accepted_finishes "
                                f"to have {lib}'s own record of its finishes judged")
    rows = job_rows(h)
    executions = by_job(h.executions())
    lines: list[str] = []
    jobs: list[int] = []
    judged = 0
    for entry in h.finishes:
        j = entry.get("job")
        if j is None:
            continue
        finishes = sorted((f for f in entry.get("finishes") or () if f.get("t") is not None),
                          key=lambda f: f["t"])
        success = next((f for f in finishes if f.get("outcome") == "success"), None)
        if success is None:
            continue
        judged += 1
        n = len(lines)
        later = [f for f in finishes if f["t"] > success["t"] and f.get("outcome") != "success"]
        status = (rows.get(j) or {}).get("status")
        if later:
            lines.append(f"job {j}: {lib} accepted a success, then a {later[0]['outcome']} "
                         f"({later[0].get('what')}) {(later[0]['t'] - success['t']) * 1000:.0f} ms later")
        elif status not in (None, "done"):
            lines.append(f"job {j}: {lib} accepted a success but the job ended {status}")
        else:
            lines += _again(j, None, executions.get(j, []), success["t"])
        jobs += [j] * (len(lines) > n)
    if lines:
        return violated(name, lines, jobs)
    if not judged:
        return unknown(name, f"{lib}'s record dates no success it accepted: nothing to judge from")
    return held(name, f"{plural(judged, 'job')} {lib} accepted a success for (its own record): none failed "
                      "or requeued after it, none executed again, each ended done")


@decides("success-final", group="safety", position=16)
def success_final(h: History, name: str) -> Result:
    """Violated by every job whose success committed (its ``job_runs`` row and its ``done``) and that
    afterwards changed to another status (the statement that did it named), ended other than done, or
    was executed again. Unknown when the final tables or the status changes were not read; not judged
    (unknown, ``judged`` False: ``--strict`` does not fail on it) when the design's queue is not the
    harness's table and it says nothing of what it accepted (a hosted library: judged from its own
    record of finishes where it keeps one). Held vacuously when no success committed. Count: jobs."""
    if not h.jobs:
        return unknown(name, "the final jobs table was not read")
    if (undecidable := rows_undecidable(h, name)) is not None:
        return undecidable
    if h.hosted:
        return _library(h, name)
    done: dict[int, dict[str, Any]] = {}
    for row in sorted(h.runs, key=lambda r: r.get("finished") or ""):
        if row.get("finished") is not None:
            done.setdefault(row["job_id"], row)
    if not done and not any(e.outcome == "ok" for e in h.executions()):
        return held(name, "vacuous: no job's success committed")
    if h.transitions is None:
        return unknown(name, "the jobs table's status changes were not recorded (a history from before "
                             "they were): whether a finished job was turned back cannot be told")
    return _table(h, name, done)
