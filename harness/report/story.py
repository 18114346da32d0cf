"""What happened: the paragraph above a counterexample, for each property it violates -- three sentences at
most, told from its run's history (who did what, in which order), the event the evidence names
(``Result.event``, a :class:`~properties.core.Mark`) and what the property promises. The same words go
into the HTML page (above the timeline) and the text report (above its timeline).

A property whose result names no event is told from its evidence line; one that names an event is told as:
what led up to it (the executions of the job it is of, in start order; for a tenant leak, the job that used
the same server session before it; for a starved job, what the other tenant ran while it waited; for a
hosted queue's finish, what its own record took, in order), the event itself, and the promise it breaks.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.history import Execution, History
from ...properties.core import VIOLATED, Mark, Result
from .html import ended

SHOWN = 4  # executions a sentence names before "and N more"

# What each property promises, as the last sentence says it breaks (DESIGN.md's table, in one clause).
PROMISES = {
    "tenant-isolation": "every statement a job sends runs as the job's own tenant, never as one a "
                        "connection kept from an earlier job",
    "single-commit": "a job commits at most one job_runs row",
    "no-overlap": "two executions of one job never run at once",
    "at-most-once-effects": "a job sends its external effect at most once",
    "attempts-counted": "every execution that started is counted in jobs.attempts",
    "bounded-attempts": "no job executes more often than the max_attempts it was enqueued with",
    "progress": "every job without a fault ends done",
    "terminal-states": "every job ends done or dead, none left queued or running",
    "bounded-blast-radius": "one poison job kills at most max_attempts worker processes",
    "horizon": "no worker holds a transaction with an xid or snapshot open across a job's long work",
    "pool-hygiene": "a worker's connections stay near its pool size, with no prepared-statement errors",
    "no-stale-effect": "no execution sends its effect after a newer attempt of its job was claimed",
    "done-means-committed": "a job is done only if an execution's work committed",
    "transient-recovers": "a job whose fault stops striking before its attempts run out ends done",
    "library-one-finish": "the hosted system accepts at most one success per job, and no finish from an "
                          "execution whose job it had meanwhile handed to another",
    "success-final": "a committed success stays final: the job never runs, queues or dies again",
    "starvation-bound": "no tenant's job waits longer than its fair share while another tenant floods the "
                        "queue",
    "tenant-cap": "no tenant runs more jobs at once than its cap",
    "work-conserving": "no worker idles while a job it may run is queued",
    "acknowledged-enqueue": "an enqueue whose commit was acknowledged is never lost",
    "attempts-monotonic": "a job's attempt count never goes down",
    "failover-recovers": "after a failover, every job still ends done or dead",
    "graceful-completes": "a job whose worker got SIGTERM with the grace it needed finishes once, in that "
                          "worker, and never runs again",
}


def _at(h: History, t: float) -> str:
    return f"+{t - h.t0:.2f} s"


def _tenant(t: int | None) -> str:
    return "no tenant" if t is None else f"tenant {t}"


def _ran(h: History, ex: Execution) -> str:
    """``w1.0 ran attempt 2 from +0.10 s to +0.90 s (fenced out)``: one execution, with how it ended (the
    words its bar ends with: :func:`.html.ended`)."""
    how = ended(ex, {x.worker: x for x in h.exits})
    session = f" on session {ex.server_pid}" if ex.server_pid is not None else ""
    until = f" to {_at(h, ex.end)}" if ex.end is not None else ""
    return f"{ex.worker} ran attempt {ex.attempt}{session} from {_at(h, ex.start)}{until} ({how})"


def _runs_of(h: History, job: int) -> str:
    """The sentence naming every execution of *job* in start order (the first :data:`SHOWN`)."""
    execs = sorted((e for e in h.executions() if e.job == job), key=lambda e: e.start)
    tenant = next((j.tenant for j in h.schedule.jobs if j.id == job), execs[0].tenant if execs else None)
    if not execs:
        return f"Job {job} ({_tenant(tenant)}) never started."
    more = f", and {len(execs) - SHOWN} more" if len(execs) > SHOWN else ""
    times = "once" if len(execs) == 1 else f"{len(execs)} times"
    return (f"Job {job} ({_tenant(tenant)}) ran {times}: "
            f"{', then '.join(_ran(h, e) for e in execs[:SHOWN])}{more}.")


def _before_on_session(h: History, m: Mark) -> str:
    """For a tenant leak: the job that used the same server session (else the same worker) before the
    leaking execution, then the leaking one -- the pool handing a tenant's connection on."""
    execs = h.executions()
    ex = next((e for e in execs if e.worker == m.worker and e.job == m.job
               and (m.attempt is None or e.attempt == m.attempt)), None)
    if ex is None:
        return _runs_of(h, m.job) if m.job is not None else ""
    same = [e for e in execs if e is not ex and e.start < ex.start and (
        (ex.server_pid is not None and e.server_pid == ex.server_pid)
        or (ex.server_pid is None and e.worker == ex.worker))]
    session = f"session {ex.server_pid}" if ex.server_pid is not None else f"{ex.worker}'s connection"
    this = f"job {ex.job} ({_tenant(ex.tenant)}, attempt {ex.attempt})"
    if not same:
        return f"{ex.worker} ran {this} on {session} from {_at(h, ex.start)}, the first job on it."
    prev = max(same, key=lambda e: e.start)
    return (f"{prev.worker} ran job {prev.job} ({_tenant(prev.tenant)}) on {session} from "
            f"{_at(h, prev.start)}, then {ex.worker} ran {this} on the same session from {_at(h, ex.start)}.")


def _while_waiting(h: History, m: Mark) -> str:
    """For a starved job: what the other tenants started while it waited, in order."""
    assert m.job is not None
    since = m.since if m.since is not None else h.t0
    tenant = next((j.tenant for j in h.schedule.jobs if j.id == m.job), None)
    others = sorted((e for e in h.executions() if since <= e.start < m.t and e.tenant != tenant
                     and e.attempt == 1), key=lambda e: e.start)
    names = ", ".join(f"{e.job}" for e in others[:SHOWN]) + (
        f" and {len(others) - SHOWN} more" if len(others) > SHOWN else "")
    tenants = sorted({str(e.tenant) for e in others})
    whose = f"tenant{'s' if len(tenants) > 1 else ''} {', '.join(tenants)}"
    if not others:
        return f"Job {m.job} ({_tenant(tenant)}) was enqueued at {_at(h, since)} and waited."
    return (f"Job {m.job} ({_tenant(tenant)}) was enqueued at {_at(h, since)}; while it waited, "
            f"{whose} started {len(others)} jobs ({names}), from {_at(h, others[0].start)} on.")


def _library_record(h: History, job: int) -> str:
    """For a hosted queue's finish: the executions of *job* in start order, then what the library's own
    record took for it, in its order (``History.finishes``: each finish's outcome, its words, its date)."""
    runs = _runs_of(h, job)
    entry = next((e for e in h.finishes or () if e.get("job") == job), None)
    took = (entry or {}).get("finishes") or []
    if not took:
        return runs
    more = f", and {len(took) - SHOWN} more" if len(took) > SHOWN else ""
    told = ", then ".join(f"{f.get('outcome')} ({f.get('what')})"
                          + (f" at {_at(h, f['t'])}" if f.get("t") is not None else "") for f in took[:SHOWN])
    return f"{runs[:-1]}; {h.design}'s own record of it took {told}{more}."


def _lead(h: History, name: str, m: Mark) -> str:
    """The sentence before the event: what led up to it."""
    if name == "tenant-isolation":
        return _before_on_session(h, m)
    if name == "starvation-bound" and m.job is not None:
        return _while_waiting(h, m)
    if name == "acknowledged-enqueue":
        stops = h.promotions()
        failover = f"; the primary stopped at {_at(h, stops[0])} and the standby took over" if stops else ""
        return f"Job {m.job}'s enqueue committed and was acknowledged before the run{failover}."
    if name == "library-one-finish" and m.job is not None:
        return _library_record(h, m.job)
    if m.job is not None:
        return _runs_of(h, m.job)
    return ""


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def what_happened(h: History, name: str, result: Result) -> str:
    """At most three sentences: what led up to the event *result* names, the event, the promise it
    breaks (from the evidence line when it names no event)."""
    promise = f"That breaks {name}: {PROMISES[name]}." if name in PROMISES else f"That breaks {name}."
    m = result.event
    if m is None:
        return f"{_sentence(result.evidence)} {promise}"
    lead = _lead(h, name, m)
    event = _sentence(f"at {_at(h, m.t)}, {m.what or m.kind}")
    if m.kind == "wait" and m.since is not None:  # the lead said what ran meanwhile
        event = (f"At {_at(h, m.t)}, {m.worker} started it, {m.t - m.since:.2f} s after its enqueue."
                 if m.worker else f"It never started: the run ended at {_at(h, m.t)}.")
    return " ".join(s for s in (lead, event, promise) if s)


def paragraphs(history: History | None, results: dict[str, Result] | None,
               names: Sequence[str]) -> list[tuple[str, str]]:
    """``(property, what happened)`` for each of *names* violated in *results* (a run's own), in order;
    none without the run's history or results."""
    if history is None or not results:
        return []
    return [(n, what_happened(history, n, results[n])) for n in names
            if n in results and results[n].status == VIOLATED]
