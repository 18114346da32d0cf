"""A history: everything one run did, as plain data, and the executions derived from it.

Sources: the execution log (the world: what each execution did, never rolled back), the final
``jobs`` and ``job_runs`` tables, how every worker process ended, what the supervisor injected,
samples of ``pg_stat_activity`` and what a hosted library accepted. A history round-trips through
JSON; properties are pure functions of it (``properties/``).

Outcomes follow Jepsen: ``ok`` (finished and committed), ``fail`` (known not to have finished: an error,
or fenced out), ``info`` (we do not know what it did: the process died, or the run ended under it).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .events import (
    WORKER_EXIT_REASONS,
    EndedBy,
    FaultStep,
    LogEvent,
    WorkerExitReason,
    event_of,
    exit_outcome,
)
from .schedule import Event, JobSpec, Schedule, Timing, expand_workload
from .workload import Workload

# How an execution ends, by its terminal event (Jepsen's outcomes: the module docstring).
TERMINAL_EVENTS = {LogEvent.FINISHED: "ok", LogEvent.FAILED: "fail", LogEvent.FENCED: "fail"}

# What a design's ``final_states`` may say of a job (``History.jobs``): waiting to run or to be retried,
# taken by a worker, finished successfully, given up. A hosted library's statuses are mapped onto these.
JOB_STATES = ("queued", "running", "done", "dead")

# What a hosted library recorded a finish as (``History.finishes``): the task succeeded, it failed (an error
# recorded), or the job went back to the queue -- a failure's retry, or the library's recovery: either.
FINISH_OUTCOMES = ("success", "failure", "requeued")


@dataclass(frozen=True)
class Clock:
    """The lease a design's runs are judged against (``horizon`` judges half of it), as the design's
    handle resolved it (``DesignHandle.clock``) and a history records it.

    ``seconds``: real seconds after which the design takes a job back (None: it has none the harness
    knows); ``basis``: whose it is -- ``declared`` (the design's own ``lease_seconds``), ``timing`` (a
    hosted library's ``TIMING`` interval anchored to the lease), ``schedule`` (the schedule's lease: a
    built-in design's) or None (none); ``what``: the same in words (or why there is none)."""

    seconds: float | None
    basis: str | None
    what: str


@dataclass
class WorkerExit:
    """How one worker process ended. ``outcome`` is a :class:`~core.events.WorkerExitReason` where the
    harness knows why (``budget``, ``stopped-by-itself``; a deploy's ``graceful``, ``killed-after-grace``),
    else its exit status named ("exit 1", "killed by SIGKILL", "worker error") or the design's own name for
    its code ("abandoned after max runtime"). A saved history's old name is read as today's ("drained":
    ``budget``: :func:`~core.events.exit_outcome`); a misspelt reason is a :class:`ValueError` here."""

    worker: str
    pid: int
    t: float  # monotonic time the supervisor saw the exit
    outcome: str  # a WorkerExitReason, "exit 1", "killed by SIGKILL", "abandoned after max runtime", ...
    code: int | None = None
    signal: int | None = None
    by_harness: bool = False  # the supervisor ended it at the end of the run
    job: int | None = None  # the job it was executing when it died, if any
    attempt: int | None = None
    error: str | None = None
    # stopped-by-itself: the worker log's last line (core/logs.py), and the last warning or error it
    # logged when that is another line (a library logs its reason, then its shutdown: procrastinate's
    # "Side task ... failed ..., stopping worker", then "Stop requested")
    detail: str | None = None
    last_warning: str | None = None

    def __post_init__(self) -> None:
        self.outcome = exit_outcome(self.outcome)

    @property
    def died(self) -> bool:
        """A worker lost: not ended by the harness at the run's end, nor at its asking (its budget, a
        deploy's SIGTERM) -- a crash, a kill, a worker error, a worker that stopped by itself."""
        return not self.by_harness and not (self.outcome in WORKER_EXIT_REASONS
                                            and WorkerExitReason(self.outcome).asked)

    def told(self) -> str:
        """The outcome in words for a report: a worker that stopped by itself with its log's last line."""
        if self.outcome != WorkerExitReason.STOPPED_BY_ITSELF:
            return self.outcome
        said = f": {self.detail}" if self.detail else " (its log is empty)"
        warned = f" (last warning: {self.last_warning})" if self.last_warning else ""
        return f"stopped by itself{said}{warned}"


@dataclass
class Execution:
    """One execution of one job by one worker, derived from the execution log."""

    worker: str
    job: int
    attempt: int
    start: float
    end: float | None = None
    outcome: str = "info"  # ok / fail / info
    error: str | None = None
    fenced: bool = False
    tenant: int | None = None
    fault: str | None = None
    inherited: str | None = None  # app.tenant before the job set anything (None: not set at all)
    inherited_read: bool = False  # whether the execution got as far as reading it
    inherited_from: str | None = None  # "worker job attempt" that last used the server session (pgjc.last)
    own_tenant: bool = False  # the worker's own code set the tenant (workers/hosted/own_connection.py)
    seen: str | None = None  # with own_tenant: the tenant setting as the job's code began
    seen_read: bool = False
    server_pid: int | None = None  # the server session it read them on (behind a pooler: not the client's)
    visible: int | None = None  # invoices visible to the job
    foreign: int | None = None  # of those, another tenant's
    effects: int = 0
    effect_times: list[float] = field(default_factory=list)  # when each effect was sent
    faults: list[dict[str, Any]] = field(default_factory=list)  # in-job faults that struck
    lease_until: float | None = None
    pid: int | None = None  # the process it ran in: the worker's, or a child its library spawned
    process_ended: bool = False  # that child died under it and the library, alive, saw it fail


@dataclass
class Effect:
    """One send of an external effect, from the execution log: by the job body itself (no key,
    always accepted) or by a relay delivering an outbox row (keyed; the world answers)."""

    job: int
    attempt: int | None  # the attempt that produced the effect (a relay's: the outbox row's)
    worker: str
    t: float
    key: str | None = None
    answer: str | None = None  # LogEvent.ACCEPTED / DUPLICATE; None: a keyed send that got no answer
    relay: str | None = None  # who delivered it: "relay" (after its execution), "sweep"; None: the body

    @property
    def accepted(self) -> bool:
        """Whether the world took it: always without a key; with one, when the world said so."""
        return self.key is None or self.answer == LogEvent.ACCEPTED


def as_schedule(value: Schedule | dict[str, Any]) -> Schedule:
    """*value* as a :class:`~core.schedule.Schedule`: itself, or built from its JSON dict
    (``Schedule.to_dict()``, what the runner and a saved history give). A field the dict leaves out
    takes the schedule's default, as a run of it would (a hand-written history may give only what it
    needs; missing ``jobs``: none). The values are taken as they are, neither validated nor converted:
    a history records what ran, and it serialises back to the same JSON."""
    if isinstance(value, Schedule):
        return value
    if not isinstance(value, dict):
        raise TypeError(f"a history's schedule is a Schedule or its dict, not {type(value).__name__}")
    data = {k: v for k, v in value.items() if k != "format"}
    data["jobs"] = tuple(j if isinstance(j, JobSpec) else JobSpec(**j) for j in data.get("jobs") or ())
    data["events"] = tuple(e if isinstance(e, Event) else Event(**e) for e in data.get("events") or ())
    timing = data.pop("timing", None)
    if timing is not None:
        data["timing"] = timing if isinstance(timing, Timing) else Timing(**timing)
    data["workload"] = Workload(**w) if isinstance(w := data.get("workload"), dict) else w  # jobs: listed
    return expand_workload(Schedule(**data))


@dataclass
class History:
    # a dict (Schedule.to_dict(): the runner's, a saved history's) is made one: as_schedule
    schedule: Schedule
    design: str
    tenant_mode: str
    # JSON read back (the execution log, the final tables, ...): a row's fields and their types follow its
    # kind (a record's: its event), which no annotation can: dict[str, Any].
    records: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    exits: list[WorkerExit]
    injected: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    ended_by: str = EndedBy.UNKNOWN  # one of core/events.py's EndedBy: quiescent, deadline, ...
    t0: float = 0.0
    t1: float = 0.0
    notes: list[str] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)  # version, description, durability settings, pooler
    # {tenant as text: invoices it owns}, from the dataset
    expected_rows: dict[str, int] = field(default_factory=dict)
    hosted: bool = False  # the design hosted a queue library (protocol v2, workers/hosted/protocol.py)
    # what it accepted per job (workers/hosted/finishes.py); None: untold
    finishes: list[dict[str, Any]] | None = None
    # The lease a threshold derived from one is judged against (DesignHandle.clock). None: not recorded
    # (a history saved before it was; a built-in design's lease is the schedule's).
    clock: Clock | None = None
    # pgjc.jobs' committed status changes (postgres/transitions.py)
    transitions: list[dict[str, Any]] | None = None
    # The most of one tenant's jobs the design promises to run at once (DesignHandle.tenant_cap; a job of
    # no tenant counts as one more tenant). None: it promises none, or a history saved before it was kept.
    tenant_cap: int | None = None

    def __post_init__(self) -> None:
        self.schedule = as_schedule(self.schedule)

    # --- derived ---------------------------------------------------------------------------------
    def executions(self) -> list[Execution]:
        """Every execution, in start order. A worker may run several jobs at once (a hosted library
        with a concurrency above one): its records are told apart by job. An execution with no
        terminal event ends when its worker exited (outcome ``info``), when the library's child process
        it ran in was seen gone (``process-exit``), or at the end of the run. A record whose event is a
        misspelt one of ``core/events.py``'s is a :class:`ValueError` here and in every reader below
        that dispatches on events; a design's own event is passed over."""
        exit_at = self.death_times()
        # By worker, job and attempt: a library may start a job's next attempt in the worker still running
        # the last (pg-boss past an expiration); a record without an attempt goes to the job's latest.
        current: dict[tuple[str, int | None, int | None], Execution] = {}  # job None: a record of no job
        latest: dict[tuple[str, int | None], Execution] = {}
        out: list[Execution] = []
        for r in sorted(self.records, key=lambda r: r["t"]):
            w = r["worker"]
            ev = event_of(r)
            if ev == LogEvent.STARTED:
                new = Execution(w, r["job"], r.get("attempt", 0), r["t"], tenant=r.get("tenant"),
                                fault=r.get("fault"), lease_until=r.get("lease_until"),
                                own_tenant=bool(r.get("own_tenant")), pid=r.get("pid"))
                prev = current.get((w, r["job"], new.attempt))
                if prev is not None and prev.end is None:  # the same attempt again with no end: cannot happen
                    prev.end = r["t"]
                current[(w, r["job"], new.attempt)] = latest[(w, r["job"])] = new
                out.append(new)
                continue
            # a library's child the job ran in is gone (workers/hosted/spawned.py)
            if ev == LogEvent.PROCESS_EXIT:
                for key, gone in list(current.items()):
                    if key[0] == w and gone.pid == r.get("exited") and gone.end is None:
                        gone.end = max(gone.start, r.get("since", r["t"]))  # died in (since, t]
                        gone.error = f"its process (pid {r.get('exited')}) ended"
                        # the library saw it fail only if it lived on (not when the process was the library)
                        gone.process_ended = not r.get("library")
                continue
            ex = current.get((w, r.get("job"), r.get("attempt"))) or latest.get((w, r.get("job")))
            if ex is None:
                continue
            if ev == LogEvent.TENANT_INHERITED:
                ex.inherited = r.get("value")
                ex.inherited_read = True
                ex.inherited_from = r.get("last") or None
                ex.server_pid = r.get("backend")
            elif ev == LogEvent.TENANT_SEEN:
                ex.seen = r.get("value")
                ex.seen_read = True
                ex.server_pid = r.get("backend")
                ex.visible = r.get("visible")
                ex.foreign = r.get("foreign")
            elif ev == LogEvent.ROWS_VISIBLE:
                ex.visible = r.get("visible")
                ex.foreign = r.get("foreign")
            elif ev == LogEvent.EFFECT and r.get("key") is None:  # a relay's keyed send: see effects()
                ex.effects += 1
                ex.effect_times.append(r["t"])
            elif ev == LogEvent.FAULT:
                ex.faults.append({"fault": r.get("fault"), "point": r.get("point"), "t": r["t"]})
            elif ev in TERMINAL_EVENTS and ex.end is None:
                ex.end = r["t"]
                ex.outcome = TERMINAL_EVENTS[ev]
                ex.fenced = ev == LogEvent.FENCED or ex.fenced
                if ev == LogEvent.FAILED:
                    ex.error = r.get("error")
                if ev == LogEvent.FENCED:
                    ex.error = "fenced out"
        for ex in out:
            if ex.end is None:
                ex.end = max(exit_at.get(ex.worker, self.t1), ex.start)
        return out

    def effects(self) -> list[Effect]:
        """Every send of an external effect, in time order, whoever sent it: the job body's own
        (attached to its execution too) and every relay delivery, with the world's answer. Unlike
        :meth:`executions`, a send is kept even when its worker is not executing the job: a relay
        delivers rows other executions committed."""
        out: list[Effect] = []
        pending: dict[tuple[str, str | None], list[Effect]] = {}
        for r in sorted(self.records, key=lambda r: r["t"]):
            ev = event_of(r)
            if ev == LogEvent.EFFECT:
                e = Effect(r["job"], r.get("attempt"), r["worker"], r["t"], r.get("key"),
                           relay=r.get("relay"))
                out.append(e)
                if e.key is not None:
                    pending.setdefault((e.worker, e.key), []).append(e)
            elif ev in (LogEvent.ACCEPTED, LogEvent.DUPLICATE):
                waiting = pending.get((r["worker"], r.get("key"))) or []
                if waiting:
                    waiting.pop(0).answer = ev
        return out

    def death_times(self) -> dict[str, float]:
        """When each exited worker really stopped. The supervisor notices an exit a tick late, and a
        replacement may start the job in between: a worker that ended itself (crash, abandon) wrote
        its last record right before, and one the supervisor killed died when it was killed. (The
        ``horizon`` property counts a dead worker's open transaction only until then.)"""
        last: dict[str, float] = {}
        for r in self.records:
            w = r["worker"]
            last[w] = max(last.get(w, r["t"]), r["t"])
        killed = {x["worker"]: x["t"] for x in self.injected
                  if x.get("fault") in (FaultStep.KILL, FaultStep.GRACE_KILL)}
        out = {}
        for x in self.exits:
            if x.worker in killed:
                out[x.worker] = min(x.t, killed[x.worker])
            elif not x.by_harness and x.signal is None and x.worker in last:
                out[x.worker] = min(x.t, last[x.worker])  # os._exit right after its last line
            else:
                out[x.worker] = x.t
        return out

    def promotions(self) -> list[float]:
        """When each failover's primary stopped (``faults/failover.py``'s ``primary-stopped`` records)
        or was demoted in place (``primary-demoted``), oldest first: the moments a replicated run lost
        its primary."""
        lost = (FaultStep.PRIMARY_STOPPED, FaultStep.PRIMARY_DEMOTED)
        return sorted(i["t"] for i in self.injected if i.get("fault") in lost and "t" in i)

    def points_reached(self) -> set[str]:
        """Every strike point some execution passed: from the outcome records (their ``points``), the
        supervisor's ``point`` records and the faults that struck."""
        out: set[str] = set()
        for r in self.records:
            ev = event_of(r)
            if ev in TERMINAL_EVENTS:
                out.update(r.get("points") or ())
            elif ev in (LogEvent.POINT, LogEvent.FAULT) and r.get("point"):
                out.add(r["point"])
        return out

    def transient_strikes(self) -> dict[int, int]:
        """``{job: strikes}`` for every job whose fault is transient (``JobSpec.strikes``) and that no
        supervisor event aims at too (what it suffers is then its own fault's doing)."""
        aimed = {e.job for e in self.schedule.events}
        return {j.id: j.strikes for j in self.schedule.jobs
                if j.fault and j.strikes is not None and j.id not in aimed}

    def statements(self) -> list[tuple[str, bool]]:
        """The statement points the run's workers sent (``workers/body/statements.py``), first seen first:
        ``(point, bound)``, bound when the statement belonged to a job."""
        out: dict[tuple[str, bool], None] = {}
        for r in sorted(self.records, key=lambda r: r["t"]):
            if event_of(r) == LogEvent.STATEMENT and r.get("point"):
                out[(r["point"], bool(r.get("bound")))] = None
        return list(out)

    def job_faults(self) -> dict[int | None, set[str]]:
        """Faults each job carries or is targeted by (job faults and supervisor events); None: a
        supervisor event at a statement point of no job."""
        out: dict[int | None, set[str]] = {}
        for j in self.schedule.jobs:
            if j.fault:
                out.setdefault(j.id, set()).add(j.fault)
        for e in self.schedule.events:
            out.setdefault(e.job, set()).add(e.fault)
        return out

    # --- JSON --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data; the schedule as its own JSON (``Schedule.to_dict()``), as the runner gave it."""
        return {**asdict(self), "schedule": self.schedule.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> History:
        d = dict(d)
        d["exits"] = [WorkerExit(**x) for x in d.get("exits", [])]
        clock = d.get("clock")
        if isinstance(clock, dict):
            d["clock"] = Clock(**clock)
        return cls(**d)
