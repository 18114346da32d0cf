"""A schedule: one run described as plain data -- frozen, JSON round-trippable, replayable.

All durations are in *article seconds* (the article's lease is 1 s) and are multiplied by
``time_scale`` when the run happens, so the same schedule runs ten times faster with 0.1.
:func:`load` turns a malformed file into a :class:`UsageError` naming the bad field.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError
from .workload import Workload

# 2: an event may strike at a statement point (sql:<name>) and name no job; 3: a point after a statement's
# reply (sql:<name>:after) and at a COMMIT (sql:commit:<name>, sql:commit:<name>:after), and a job's fault
# (crash) at a statement point; 4: the deploy fault (its variants rolling, same-identity, drain and their
# -all forms) and ``timing.grace``; format 1 to 3 files load as they are (their points mean what they meant,
# their timing has no grace: the default)
FORMAT = 4

# The named points of a job's life, in the order a job body reaches them. Faults strike here.
JOB_POINTS = ("before-tenant", "after-insert", "mid-work", "after-effect", "before-finish")
# The points of a relay that delivers a committed outbox row to the world (lease-outbox): right
# before the send, and between the send and marking the row delivered (a crash there re-delivers).
RELAY_POINTS = ("before-deliver", "after-deliver")
POINTS = JOB_POINTS + RELAY_POINTS
STATEMENT_PREFIX = "sql:"  # a strike point between a design's own statements (workers/body/statements.py)
AFTER = ":after"  # sql:<name>:after -- after the statement's reply (in autocommit: after its commit)
COMMIT = STATEMENT_PREFIX + "commit"  # sql:commit:<last statement> -- before a COMMIT; + AFTER: after it


def is_statement_point(point: str | None) -> bool:
    """Whether *point* is a statement point (``sql:...``), not one of the body's named points."""
    return point is not None and point.startswith(STATEMENT_PREFIX) and len(point) > len(STATEMENT_PREFIX)


def is_before_statement(point: str) -> bool:
    """A point before a statement is sent (format 2's only kind): neither after a reply nor a COMMIT."""
    return is_statement_point(point) and not point.endswith(AFTER) and not (
        point == COMMIT or point.startswith(COMMIT + ":"))


Validator = Callable[["Schedule", Callable[[str], None]], None]
"""A check of a schedule's names (faults, tenant modes) by the layer that knows them: it calls
``bad("field: message")`` for the first problem it finds."""


@dataclass(frozen=True)
class JobSpec:
    """One queued job, in queue order: who it is for, how long it works, what fault it carries."""

    id: int
    tenant: int | None = 1  # None: a system job, which must see no tenant's rows
    duration: float = 0.05  # article seconds of work
    fault: str | None = None  # a job fault from the catalogue; it strikes on every execution
    point: str | None = None  # where it strikes; None: the fault's default point
    # A transient fault: it strikes only the job's first *strikes* executions in the run (counted from
    # the run's own ``started`` records, not the design's attempt number); None: every execution.
    strikes: int | None = None


# An event's variant when it names none: its fault's first (declare_variants), else this one (a fault
# without variants; every fault's before an event's default was its fault's own).
DEFAULT_VARIANT = "xid"
# Hazard: filled by the fault catalogue (faults/catalogue.py) when it is imported -- this layer cannot
# import it. An Event made before that import (only code that never loads the catalogue: no schedule
# is checked, no fault runs without it) takes DEFAULT_VARIANT, which every fault accepts as it did.
_FIRST_VARIANTS: dict[str, str] = {}


def declare_variants(variants: Mapping[str, Sequence[str]]) -> None:
    """Each fault's variants (the catalogue's declarations): an :class:`Event` of one that names no
    variant takes the first."""
    _FIRST_VARIANTS.update({fault: names[0] for fault, names in variants.items() if names})


def default_variant(fault: str) -> str:
    """The variant an event of *fault* carries when it names none: the fault's first, else ``xid``."""
    return _FIRST_VARIANTS.get(fault, DEFAULT_VARIANT)


@dataclass(frozen=True)
class Event:
    """A supervisor fault, triggered when an execution of ``job`` reaches ``point``. Its ``variant``
    defaults to the fault's first (:func:`default_variant`: horizon's ``xid``, failover's ``lagging``);
    a saved schedule names it, and one that does not (a hand-written file) reads with that default."""

    fault: str
    job: int | None  # None: a statement point of no job (workers/body/statements.py: a maintenance statement)
    point: str = "mid-work"  # a named point, or a statement point "sql:<name>"
    occurrence: int = 1  # strike the n-th time an execution of the job reaches the point
    duration: float | None = None  # pause / horizon length in article seconds (default: 2 leases)
    # horizon: "xid" (a transaction that wrote) or "repeatable-read" (a reader); failover: "lagging",
    # "switchover" or "demote-in-place"; "" (the default): the fault's first (default_variant)
    variant: str = ""

    def __post_init__(self) -> None:
        if not self.variant:
            object.__setattr__(self, "variant", default_variant(self.fault))  # frozen: set once, here


@dataclass(frozen=True)
class Timing:
    """The timing knobs, in article seconds. ``None`` means "derived" (see the properties below)."""

    lease: float = 1.0
    poll: float = 0.1
    heartbeat: float | None = None  # default lease / 4
    max_runtime: float = 5.0  # lease-heartbeat abandons a job after this long
    restart_delay: float | None = None  # default: the design's (0 for one-transaction, 1.1 for leases)
    deadline: float = 60.0  # the run ends here whatever happens
    stall: float | None = None  # end when nothing happened for this long (default: see Schedule.stall)
    strike_wait: float = 30.0  # a worker waits at most this long for the supervisor at a strike point
    latency: float = 0.05  # the latency fault: added to every chunk of the worker's traffic, either way
    # The deploy fault: SIGTERM, then SIGKILL this long after it if the worker is still there (None:
    # DEFAULT_GRACE, Kubernetes' terminationGracePeriodSeconds default)
    grace: float | None = None


# Kubernetes' default terminationGracePeriodSeconds (article seconds, so scaled like every duration): the
# grace a deploy gives when neither the schedule (--grace) nor the system names one.
DEFAULT_GRACE = 30.0


# --- tenant workloads (issue 38): the parameters in core/workload.py ------------------------------------
def workload_jobs(w: Workload) -> list[JobSpec]:
    """The jobs *w* stands for, ids 1.. in queue order (no faults: a drawn job carries those)."""
    return [JobSpec(id=i, tenant=t, duration=d) for i, (t, d) in enumerate(w.queue(), 1)]


def expand_workload(s: Schedule) -> Schedule:
    """*s* with its workload's jobs, overlaid by the jobs it lists (same id: the listed one, e.g. a
    drawn fault on a flood job; a new id: an extra job after the workload's). A saved file lists only
    those (``to_dict``); a schedule with a workload must hold every job of it."""
    if s.workload is None:
        return s
    listed = {j.id: j for j in s.jobs}
    jobs = [listed.pop(j.id, j) for j in workload_jobs(s.workload)]
    return s.replace(jobs=tuple(jobs + list(listed.values())))


@dataclass(frozen=True)
class Schedule:
    jobs: tuple[JobSpec, ...]
    workers: int = 1
    events: tuple[Event, ...] = ()
    design: str = "lease"
    tenant_mode: str = "local"
    time_scale: float = 1.0
    timing: Timing = field(default_factory=Timing)
    max_attempts: int = 3
    dequeues: int | None = None  # per worker; then it exits (WorkerExitReason.BUDGET: "budget")
    restarts: int | None = None  # restart budget for the whole run (default: see restart_budget)
    pool_size: int = 1
    # Where it ran, stamped by the runner and used by a replay unless the command line says otherwise:
    pg_version: int | None = None  # the server's major version
    pooler: str | None = None  # e.g. "pgbouncer:transaction"; None: workers connect directly
    replica: str | None = None  # "async" / "sync": a primary and a streaming standby (the failover fault)
    # What the design was built with (--design-option key=value), and the hosted library's version:
    # both change a run, so a replay uses the options and warns when the version differs.
    design_options: dict[str, str] = field(default_factory=dict, hash=False)
    libraries: dict[str, str] = field(default_factory=dict, hash=False)
    # A declared tenant workload (issue 38): its jobs are in ``jobs`` (see workload_jobs); a saved file
    # lists only the jobs it does not give. None: the jobs are all listed (every schedule before it).
    workload: Workload | None = None

    def seconds(self, article_seconds: float) -> float:
        """Real seconds for a duration given in article seconds."""
        return article_seconds * self.time_scale

    @property
    def heartbeat(self) -> float:
        return self.timing.heartbeat if self.timing.heartbeat is not None else self.timing.lease / 4

    @property
    def grace(self) -> float:
        """A deploy's grace in article seconds: the schedule's, else :data:`DEFAULT_GRACE`."""
        return self.timing.grace if self.timing.grace is not None else DEFAULT_GRACE

    @property
    def restart_budget(self) -> int:
        """Enough for every job to kill ``max_attempts`` workers, plus one per worker: a design that
        keeps its blast radius bounded never runs out; one that does not is cut off here."""
        if self.restarts is not None:
            return self.restarts
        return self.max_attempts * len(self.jobs) + self.workers

    @property
    def stall(self) -> float:
        """Article seconds with no new record in the execution log after which the run ends
        ("stalled": a hung worker nobody replaces). Longer than a max runtime, a few leases and the
        longest job, so that no design that is still making progress is cut off."""
        if self.timing.stall is not None:
            return self.timing.stall
        longest = max((j.duration for j in self.jobs), default=0.0)
        return self.timing.max_runtime + 4 * self.timing.lease + 2 * longest

    def faults(self) -> list[str]:
        names = [j.fault for j in self.jobs if j.fault] + [e.fault for e in self.events]
        return sorted(set(names))

    def replace(self, **changes: typing.Any) -> Schedule:  # checked at the call (mypy: dataclasses.replace)
        return dataclasses.replace(self, **changes)

    # --- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        data = {"format": FORMAT, **dataclasses.asdict(self)}
        if self.workload is None:
            data.pop("workload")  # a schedule without one saves as it always did
        else:
            made = {j.id: j for j in workload_jobs(self.workload)}
            if set(made) - {j.id for j in self.jobs}:  # a saved file would bring them back
                raise ValueError("a schedule with a workload holds every job of it")
            data["jobs"] = [dataclasses.asdict(j) for j in self.jobs if made.get(j.id) != j]
        for job in data["jobs"]:  # no strikes: a fault on every execution (the key left out)
            if job.get("strikes") is None:
                job.pop("strikes", None)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, object], *, source: str = "schedule",
                  validators: Iterable[Validator] = ()) -> Schedule:
        """A schedule from JSON data; :class:`UsageError` naming *source* and the field when it is
        malformed. The base layer checks structure; *validators* check the names it cannot know."""
        data = dict(data)
        fmt = data.pop("format", None)  # absent: the current format (a hand-written schedule)
        if fmt is not None and (type(fmt) is not int or not 1 <= fmt <= FORMAT):
            newer = (" (a newer pg-job-chaos wrote it: upgrade to replay it)"
                     if type(fmt) is int and fmt > FORMAT else "")
            raise UsageError(f"{source}, field format: {fmt!r}; this version reads formats 1 to "
                             f"{FORMAT}{newer}")
        events = data.get("events")
        # named, it is a name: "" is no default (a list of something else: _build names the field)
        for i, e in enumerate(events if isinstance(events, list) else ()):
            if isinstance(e, dict) and e.get("variant") == "":
                raise UsageError(f"{source}, field events[{i}].variant: a name, e.g. 'xid'")
        sched = expand_workload(_build(cls, data, source))
        check(sched, source, validators)
        return sched


def load(path: str | Path, *, validators: Iterable[Validator] = ()) -> Schedule:
    """Read a schedule file; :class:`UsageError` naming the file and field when it is malformed."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read schedule file {p}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"schedule file {p} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"schedule file {p}: expected a JSON object at the top")
    return Schedule.from_dict(data, source=f"schedule file {p}", validators=validators)


if typing.TYPE_CHECKING:
    from _typeshed import DataclassInstance

_D = typing.TypeVar("_D", bound="DataclassInstance")


def _build(cls: type[_D], data: object, where: str, prefix: str = "") -> _D:
    """*cls* from *data*; errors say ``<where>, field <prefix><name>``."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}, field {prefix.rstrip('.') or '(top)'}: expected an object")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise UsageError(f"{where}: unknown field {prefix}{unknown[0]!r}; known: {', '.join(sorted(names))}")
    kwargs: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise UsageError(f"{where}, field {prefix}{f.name}: missing")
            continue
        kwargs[f.name] = _value(hints[f.name], data[f.name], where, f"{prefix}{f.name}")
    return cls(**kwargs)


def _value(tp: object, v: object, where: str, path: str) -> object:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _value(inner, v, where, path)
    if origin is tuple:
        if not isinstance(v, list):
            raise UsageError(f"{where}, field {path}: expected a list")
        return tuple(_value(args[0], x, where, f"{path}[{i}]") for i, x in enumerate(v))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a class (not an instance) in a type hint
        return _build(tp, v, where, f"{path}.")
    if origin is dict:
        if not isinstance(v, dict):
            raise UsageError(f"{where}, field {path}: expected an object")
        return {str(k): _value(args[1], x, where, f"{path}.{k}") for k, x in v.items()}
    if tp is float and isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if tp is int and isinstance(v, int) and not isinstance(v, bool):
        return v
    if tp is str and isinstance(v, str):
        return v
    raise UsageError(f"{where}, field {path}: expected {getattr(tp, '__name__', tp)}, got {json.dumps(v)}")


def check(s: Schedule, where: str, validators: Iterable[Validator] = ()) -> None:
    """Structural checks, then each validator; the first problem is a :class:`UsageError`."""

    def bad(msg: str) -> typing.NoReturn:
        raise UsageError(f"{where}, field {msg}")

    if not s.jobs:
        bad("jobs: at least one job")
    ids = [j.id for j in s.jobs]
    if len(set(ids)) != len(ids):
        bad("jobs: job ids must be unique")
    for i, j in enumerate(s.jobs):
        if j.point is not None and j.point not in POINTS and not is_statement_point(j.point):
            bad(f"jobs[{i}].point: unknown point {j.point!r}; points: {', '.join(POINTS)}, "
                "or sql:<statement>")
        if j.duration < 0:
            bad(f"jobs[{i}].duration: must be >= 0")
        if j.tenant is not None and not 1 <= j.tenant <= 100:
            bad(f"jobs[{i}].tenant: tenants are 1..100 or null")
        if j.strikes is not None and (j.strikes < 1 or j.fault is None):
            bad(f"jobs[{i}].strikes: at least 1, and only with a fault")
    for i, e in enumerate(s.events):
        statement = is_statement_point(e.point)
        if e.point not in POINTS and not statement:
            bad(f"events[{i}].point: unknown point {e.point!r}; points: {', '.join(POINTS)}, "
                "or sql:<statement>")
        if e.job not in ids and not (e.job is None and statement):
            bad(f"events[{i}].job: no job {e.job} in jobs" if e.job is not None else
                f"events[{i}].job: only a statement point (sql:...) may name no job")
        # an event's variant is never empty (Event.__post_init__); which variants a fault takes is the
        # catalogue's to check (faults.check_schedule)
    if s.workload is not None:
        s.workload.check(bad)
    if s.workers < 1:
        bad("workers: at least 1")
    if s.time_scale <= 0:
        bad("time_scale: must be > 0")
    if s.max_attempts < 1:
        bad("max_attempts: at least 1")
    for validate in validators:
        validate(s, bad)
