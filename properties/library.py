"""``library-one-finish``: what a hosted queue library itself accepted for each job.

Under the hosted protocol (``workers/hosted/protocol.py``) the harness's body commits its ``job_runs`` row and
sends its effect *before* the library's own finish runs: what ``single-commit``,
``at-most-once-effects`` and ``no-stale-effect`` find there is at-least-once by design, and no fence of
the library's could have prevented it (``properties/explain.py`` says so on their evidence). What the
library does get right or wrong is its own record: how many finishes it takes for one job, and whether
it takes the finish of an execution whose job it had meanwhile handed to another.

The record is the library's own tables, read after the run (``History.finishes``, from the design's
``accepted_finishes``, dated on the execution log's clock). Each finish is attributed to the execution
of its job that returned to the library last before it with the matching end -- a success to one whose
body finished (``ok``), a failure to one whose body raised (``fail``); a finish the library does not
date, by the attempt it names. A ``requeued`` finish (procrastinate's ``deferred_for_retry``) that no
failed execution explains was the library's recovery, not a finish. A library that keeps only its
last finish of a job (``complete`` False) cannot show that it refused a stale execution's finish:
where one was stale, unknown. An execution is **stale** at its
finish when another execution of the same job started after it and before that finish: the job had
been recovered and re-handed.
"""

from __future__ import annotations

from typing import Any

from ..core.history import Execution, History
from .checks import by_job, plural, who
from .core import Mark, Result, decides, held, not_judged, unknown, violated

# How the runner notes an accepted_finishes that raised (workers/hosted/finishes.py, read): that run could
# not read what the library accepted -- an unknown of the run's, unlike a design that says nothing.
RAISED = "accepted_finishes raised"

# Seconds a finish may be dated before the end it follows: the server's clock is read once, half a
# round trip either way (workers/hosted/finishes.py), and a timestamp is rounded to the microsecond.
SLACK = 0.005
ENDS: dict[str, tuple[str, ...]] = {"success": ("ok",), "failure": ("fail",), "requeued": ("fail",)}


def _end(ex: Execution) -> float:
    """*ex*'s end: :meth:`History.executions` gives every execution one (its last record, its worker's
    exit or the run's end); an execution without one was not made there."""
    if ex.end is None:
        raise ValueError(f"{who(ex)} of job {ex.job} has no end: not an execution History.executions() gave")
    return ex.end


def _at(f: dict[str, Any], ex: Execution) -> float:
    """When finish *f* was taken: its date, or, undated, the end of *ex*, the execution it is told of."""
    return f["t"] if f.get("t") is not None else _end(ex)


def _whose(f: dict[str, Any], execs: list[Execution], taken: set[int]) -> list[Execution]:
    """The executions *f* may have come from: the one that returned last before it (dated), or every
    one told the attempt it names (undated). Executions already given a finish are not candidates."""
    ends = ENDS.get(f.get("outcome") or "", ())
    # A library's child that died under an execution (chancy's process executor) is a failure the
    # library, still alive, received: the execution's log has no end of its own (workers/hosted/spawned.py).
    fits = [ex for ex in execs if (ex.outcome in ends or (ex.process_ended and "fail" in ends))
            and id(ex) not in taken]
    if f.get("t") is not None:
        # An execution that started after the finish was recorded cannot have produced it: with retries
        # a few ms apart (procrastinate's), the next one may end within SLACK of an earlier finish.
        before = [(ex.end, ex) for ex in fits if ex.end is not None and ex.end <= f["t"] + SLACK
                  and ex.start < f["t"]]
        return [max(before, key=lambda pair: pair[0])[1]] if before else []
    if f.get("attempt") is not None:
        return [ex for ex in fits if ex.attempt == f["attempt"]]
    return fits


def _newer(ex: Execution, execs: list[Execution], until: float) -> list[Execution]:
    """Executions of the same job that started after *ex* and before *until*: *ex* is stale then."""
    return sorted((o for o in execs if o is not ex and ex.start < o.start < until), key=lambda o: o.start)


def _second_success(lib: str, job: int, successes: list[dict[str, Any]],
                    source: dict[int, Execution]) -> Mark | None:
    """The event of "accepted N successful finishes": the second success the library took (in its
    record's order, by date where it dates them), on the execution it came from where that is known,
    else across the timeline at its date; None when it is neither attributed nor dated."""
    order = sorted(successes, key=lambda f: f["t"]) if all(f.get("t") is not None for f in successes) \
        else successes
    first = order[0]
    second = order[1]
    ex = source.get(id(second))  # the execution the second success came from
    before = source.get(id(first))
    came = f", after the first from {who(before)}" if before is not None else ""
    if ex is not None:
        return Mark(_at(second, ex), "finish", ex.worker, job,
                    f"{lib} accepted a second success ({second.get('what')}) of job {job}, from {who(ex)}"
                    f"{came}", attempt=ex.attempt)
    if second.get("t") is None:
        return None
    return Mark(second["t"], "finish", "", job,
                f"{lib} accepted a second success ({second.get('what')}) of job {job}{came}")


def _judge(lib: str, job: int, entry: dict[str, Any],
           execs: list[Execution]) -> tuple[list[str], str | None, list[str], int, Mark | None]:
    """One job: the violations, why it cannot be decided (None: it can), the stale executions whose
    finish the library did not record, how many finishes it took from an execution, and the event of
    the first violation (the second success taken, else the first finish taken from a stale execution)."""
    lines: list[str] = []
    recorded = entry.get("recorded") or "no record"
    finishes = entry.get("finishes") or []
    successes = [f for f in finishes if f.get("outcome") == "success"]
    if len(successes) > 1:
        lines.append(f"job {job}: {lib} accepted {len(successes)} successful finishes ({recorded})")
    taken: set[int] = set()
    source: dict[int, Execution] = {}  # id(finish) -> the execution it was attributed to
    stale_mark: Mark | None = None

    def event() -> Mark | None:
        return _second_success(lib, job, successes, source) if len(successes) > 1 else stale_mark

    for f in finishes:
        whose = _whose(f, execs, taken)
        if not whose:
            if f.get("outcome") != "requeued":  # requeued by nobody's failure: the library's recovery
                when = f" at {f['t']:.2f} s" if f.get("t") is not None else ""
                return lines, (f"job {job}: {lib} recorded a {f['outcome']} ({f.get('what')}){when} that no "
                               f"execution of the job explains ({recorded})"), [], 0, event()
            continue
        stale = [ex for ex in whose if _newer(ex, execs, _at(f, ex))]
        if len(whose) > 1 and stale:
            return lines, (f"job {job}: {lib} recorded a {f['outcome']} ({f.get('what')}) it does not date, "
                           f"and {who(stale[0])} was stale: cannot tell whose it took ({recorded})"), [], 0, \
                event()
        ex = whose[0]
        taken.add(id(ex))
        source[id(f)] = ex
        if stale:
            until = _at(f, ex)
            first = _newer(ex, execs, until)[0]
            lines.append(f"job {job}: {lib} accepted the {f['outcome']} ({f.get('what')}) of {who(ex)}, "
                         f"{(until - first.start) * 1000:.0f} ms after {who(first)} had started: a stale "
                         f"execution's finish ({recorded})")
            stale_mark = stale_mark or Mark(
                until, "finish", ex.worker, job,
                f"{lib} accepted the {f['outcome']} ({f.get('what')}) of job {job} from {who(ex)}, a stale "
                f"execution: {who(first)} had started {(until - first.start) * 1000:.0f} ms earlier",
                attempt=ex.attempt)
    refused = [f"job {job}'s {who(ex)}" for ex in execs
               if (ex.outcome in ("ok", "fail") or ex.process_ended) and id(ex) not in taken
               and _newer(ex, execs, _end(ex))]
    return lines, None, refused, len(taken), event()


@decides("library-one-finish", group="safety", position=15)
def library_one_finish(h: History, name: str) -> Result:
    """For a hosted design: violated by every job the library accepted more than one successful
    finish for, and by every finish it accepted from a stale execution (see the module docstring).
    Unknown when a finish cannot be attributed, or the design's ``accepted_finishes`` raised; not judged
    (unknown, ``judged`` False: ``--strict`` does not fail on it) when the design does not say what
    the library accepted (no ``accepted_finishes``, or one that returns None). Held vacuously for a
    built-in design, whose finish is the transaction ``single-commit`` judges. Count: offences. The
    event (the first violated job's): the second success the library accepted, on the execution it came
    from, else the first finish it accepted from a stale execution."""
    if not h.hosted:
        return held(name, "vacuous: not a hosted queue (the design's finish commits with its job_runs row: "
                          "single-commit judges it)")
    lib = h.design  # a library's name or your own queue's: the evidence names it, never "the library"
    if h.finishes is None:
        failed = next((note for note in h.notes if RAISED in note), None)
        if failed is not None:
            return unknown(name, f"{lib}'s own record of its finishes could not be read: {failed}")
        return not_judged(name, f"{lib} does not say what it accepted (its design has no "
                                "accepted_finishes, or it returns None): implement accepted_finishes to "
                                f"have {lib}'s own record of its finishes judged")
    entries = {e.get("job"): e for e in h.finishes}
    groups = by_job(h.executions())
    ids: set[int] = {row["id"] for row in h.jobs if row.get("id") is not None} | set(groups)
    order = sorted(ids, key=lambda j: (0, j, "") if isinstance(j, int) else (1, 0, str(j)))
    lines = []
    jobs = []
    refused = []
    undecided = []
    total = 0
    first: Mark | None = None  # the event of the first violation (the first job's)
    for job in order:
        if job not in entries:
            undecided.append(f"{lib}'s accepted finishes say nothing of job {job}")
            continue
        found, why, not_taken, taken, mark = _judge(lib, job, entries[job], groups.get(job, []))
        first = first or (mark if found else None)
        if not_taken and not why and not entries[job].get("complete", True):
            # a last-finish-only record: the stale execution's finish may have been taken and overwritten
            recorded = entries[job].get("recorded") or "no record"
            why = (f"{not_taken[0]} was stale and {lib} keeps only its last finish of a job: whether it took "
                   f"that finish and overwrote it cannot be told ({recorded})")
        undecided += [why] if why else []
        lines += found
        jobs += [job] * bool(found)
        refused += not_taken
        total += taken
    if lines:  # a violation found is reported, whatever another job leaves undecided
        return violated(name, lines, jobs, event=first)
    if undecided:
        return unknown(name, undecided[0])
    note = ""
    if refused:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        note = f"; it recorded no finish of the stale {refused[0]}{more}: refused, or never written"
    return held(name, f"{lib} accepted {plural(total, 'finish', 'finishes')} for "
                      f"{plural(len(order), 'job')}, at most one success each, "
                      f"none from a stale execution{note}")
