"""What a run's history shows its design declared wrong: three mistakes that give false verdicts.

Each is a mistake a user's design makes in what it *tells* the harness, not in what its queue does, and
each turns into a wrong verdict no property can tell from a real one (issue 46, where our own guide led
a new user into all three). :func:`findings` judges one history; ``check-design`` prints each as a check
that fails its design (``harness/cli/check.py``), and a search or a replay says each found as a
``WARNING`` line in its progress and after its table, leaving the properties' verdicts as they are.

``setting``
    The worker's own tenant code (``run_job(..., conn=...)``: the executions' ``own_tenant``) sets a
    custom setting by name, and never the design's declared ``tenant_setting`` (``app.tenant`` when it
    declares none). The statement tracking (``workers/body/statements.py``) logs every custom setting the
    worker's own code sets by name, once per worker (``setting-set``). Then ``tenant-isolation`` reads a
    setting nothing sets and reports every job as run without its tenant. Flagged, not fixed: the harness
    does not take the setting's name from what the code set -- a worker may set several (a user, a
    request id) and which is the tenant is the design's to say; a guess could judge the wrong one and
    say ``held`` -- and the invoices' policy is made to read the declared setting before the run.
``lease``
    The design declares ``lease_seconds`` and it gives None where the harness asks for it (the run's
    view, after ``for_run``: ``History.clock`` with basis ``declared`` and no seconds): ``horizon`` is
    then not judged. Made impossible where it was the guide's own advice -- ``return self.lease`` was
    None because the harness asked the design itself, before ``for_run``; it now asks the run's view
    (``DesignHandle.clock``) -- and flagged where it remains (a value set only in the worker process, an
    override of ``for_run`` that drops the lease).
``finish-time``
    A success the design's ``accepted_finishes`` dates on the database clock is earlier than the last
    statement of its job's body (its ``job_runs`` row's ``finished``, the server's ``clock_timestamp()``
    at the insert, on the same clock; of the attempt the finish names, else of the job's earliest
    committed body). A finish follows the body it finishes, so such a date is a transaction-start time
    (``now()``, ``current_timestamp``) of a transaction that began before the body ran -- where the job
    and its finish share one transaction -- and ``library-one-finish`` attributes the finish to an
    earlier execution (a false stale finish, a false "ran again after success"). Only a date earlier than
    every body of the job that committed (or than the named attempt's) is flagged: a now() that happens
    to fall after an earlier committed body is not seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .events import LogEvent
from .history import History

SETTING = "setting"
LEASE = "lease"
FINISH_TIME = "finish-time"
CHECKS = (SETTING, LEASE, FINISH_TIME)  # in findings' order

# Seconds a database-clock finish may be dated before its body's last statement and still be after it: a
# library that keeps whole milliseconds (DBOS's epoch ms) truncates up to 1 ms. A transaction-start time
# precedes the body's last statement by the body's claim and reads, several ms at the least.
DATE_SLACK = 0.001


@dataclass(frozen=True)
class Finding:
    """One check of :func:`findings`: ``held`` False when the history shows the mistake, with ``fix``."""

    check: str  # SETTING, LEASE or FINISH_TIME
    what: str  # what holds when the design declares right (check-design's line)
    held: bool
    evidence: str
    fix: str = ""

    def warning(self) -> str:
        """The line a search or a replay prints for a mistake found."""
        return f"WARNING: {self.check}: {self.evidence}; fix: {self.fix}"


def setting(h: History) -> Finding:
    """The ``setting`` check (module docstring)."""
    what = "setting: the worker's own tenant code sets the declared tenant_setting"
    sets = [r for r in h.records if r.get("event") == LogEvent.SETTING_SET]
    own = any(r.get("event") == LogEvent.STARTED and r.get("own_tenant") for r in h.records)
    declared = next((str(r["declared"]) for r in sets if r.get("declared")), None)
    names = list(dict.fromkeys(str(r.get("setting")) for r in sets))
    if not own:
        return Finding(SETTING, what, True, "no job ran on the worker's own connection (run_job's conn=): "
                                            "the run's tenant mode sets the tenant")
    if not names:
        return Finding(SETTING, what, True, "the worker's own code set no custom setting by name (one set "
                                            "by a function of its own or a role's default is not seen)")
    if declared in names:
        others = [n for n in names if n != declared]
        also = f" (also {', '.join(others)})" if others else ""
        return Finding(SETTING, what, True, f"it sets {declared}, as declared{also}")
    first = next(r for r in sets if r.get("setting") == names[0])
    spelled = " or ".join(repr(n) for n in names)
    return Finding(
        SETTING, what, False,
        f"the worker's own code sets {', '.join(names)} (`{first.get('statement')}`), never {declared}, the "
        f"tenant_setting the harness watches: tenant-isolation reads {declared}, which nothing sets, and "
        "reports every job as run without its tenant",
        f"declare tenant_setting = {spelled} on the design class (the setting its tenant code sets; the "
        "invoices' policy then reads it too)")


def lease(h: History) -> Finding:
    """The ``lease`` check (module docstring)."""
    what = "lease: a declared lease_seconds gives seconds where the harness asks for it"
    clock = h.clock
    if clock is None or clock.basis != "declared":
        return Finding(LEASE, what, True, "no lease_seconds declared")
    if clock.seconds is not None:
        return Finding(LEASE, what, True, f"{clock.seconds:g} s on the run's view")
    return Finding(
        LEASE, what, False, f"{clock.what}: horizon is not judged",
        "return the real seconds after which the queue takes a job back from its worker -- self.lease "
        "is the schedule's lease on the run's view (an override of for_run must return "
        "super().for_run(schedule)'s copy; a value set in run_worker lives in the worker process only) "
        "-- or leave lease_seconds out if the queue never takes a job back")


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def finish_time(h: History) -> Finding:
    """The ``finish-time`` check (module docstring)."""
    what = "finish-time: a success dated on the database clock is after its body's last statement"
    if h.finishes is None:
        return Finding(FINISH_TIME, what, True, "no accepted_finishes: no finish dated")
    bodies: dict[Any, list[tuple[Any, datetime]]] = {}
    for r in h.runs:
        end = _when(r.get("finished"))
        if end is not None and end.tzinfo is not None:
            bodies.setdefault(r.get("job_id"), []).append((r.get("attempt"), end))
    early = []
    dated = 0
    for entry in h.finishes:
        job = entry.get("job")
        for f in entry.get("finishes") or ():
            at = _when(f.get("at"))
            if f.get("outcome") != "success" or f.get("clock") != "database" or at is None \
                    or at.tzinfo is None:
                continue
            ends = [end for attempt, end in bodies.get(job, ())
                    if f.get("attempt") is None or attempt == f.get("attempt")]
            if not ends:
                continue
            dated += 1
            body = min(ends)
            if (body - at).total_seconds() > DATE_SLACK:
                early.append((job, f, at, body))
    if not early:
        each = f"{dated} dated success{'es' if dated != 1 else ''}, each after its body's last statement"
        return Finding(FINISH_TIME, what, True,
                       each if dated else "no success dated on the database clock beside a committed body")
    job, f, at, body = early[0]
    body = body.astimezone(at.tzinfo)
    more = f" ({len(early)} of {dated} dated successes)" if len(early) > 1 else ""
    return Finding(
        FINISH_TIME, what, False,
        f"job {job}'s success ({f.get('what')}) is dated {at.time().isoformat()}, "
        f"{(body - at).total_seconds() * 1000:.0f} ms before its body's last statement "
        f"({body.time().isoformat()}, the job_runs row's clock_timestamp()){more}: a transaction-start "
        "time, now() or current_timestamp, of a transaction that began before the job ran -- "
        "library-one-finish then takes the finish for an earlier execution's",
        "date the finish with clock_timestamp() (the time its statement runs), not now(), "
        "current_timestamp or transaction_timestamp() (when its transaction began)")


def findings(h: History) -> list[Finding]:
    """The three checks of one history, in the module docstring's order."""
    return [setting(h), lease(h), finish_time(h)]


def warnings(histories: Iterable[History]) -> list[str]:
    """The :meth:`Finding.warning` line of each mistake the *histories* show, the first run's per check."""
    out: dict[str, str] = {}
    for h in histories:
        for f in findings(h):
            if not f.held and f.check not in out:
                out[f.check] = f.warning()
    return list(out.values())
