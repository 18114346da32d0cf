"""Results, and how they compose.

A property is a pure function ``History -> Result``. A result is *held*, *violated* or *unknown*
(the property could not decide: never report held for that), with how many offending things it
found, the offending job ids and one line of evidence in the user's terms. Results compose
worst-first: violated > unknown > held (Jepsen's ``checker.clj``, ``merge-valid``).

An unknown is either a run's (what the run lacked: no sample, a table not read) or the design's
(``judged`` False, :func:`not_judged`): the property is not judged for this design, because what
it needs the design does not declare (``library-one-finish`` without ``accepted_finishes``, ``horizon``
without a lease) -- the same in every run. Both stay unknown, never held; ``--strict`` fails on the
first kind only (:func:`undecided_names`), since no run of that design could decide the second.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..core.history import History

HELD = "held"
VIOLATED = "violated"
UNKNOWN = "unknown"
_RANK = {HELD: 0, UNKNOWN: 1, VIOLATED: 2}


@dataclass(frozen=True)
class Mark:
    """The event of a run a violation's evidence names, for a timeline to mark: ``t`` on the history's
    clock (``time.monotonic()``, as its records), what ``kind`` of event ("statement", "execution",
    "status change", "wait", "transaction"), the ``worker``, ``job`` and ``attempt`` where known, and one
    sentence saying ``what`` it is; ``since``: where the event is a span (a job's wait from its enqueue,
    a transaction open since it began), when it began, on the same clock."""

    t: float
    kind: str
    worker: str = ""
    job: int | None = None
    what: str = ""
    attempt: int | None = None
    since: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in vars(self).items() if v not in ("", None)}


@dataclass(frozen=True)
class Result:
    """One property's verdict on one history (or, through :func:`aggregate`, on many).

    ``jobs`` is normalized to sorted unique ids and ``evidence`` to one line; an unknown status
    raises :class:`ValueError`.
    """

    name: str
    status: str  # "held" | "violated" | "unknown"
    count: int = 0  # how many offending things (jobs, executions, samples...)
    jobs: tuple[int, ...] = ()  # offending job ids, sorted
    evidence: str = ""  # ONE line in the user's terms
    # the property this violation follows from, "budget" or "at-least-once" (properties/explain.py)
    cause: str = ""
    # False: unknown because of what the design declares, not what a run lacked (see the module docstring)
    judged: bool = True
    # the event the evidence names (optional: a property that sets none leaves the timeline unmarked)
    event: Mark | None = None

    def __post_init__(self) -> None:
        if self.status not in _RANK:
            raise ValueError(f"property {self.name}: status {self.status!r} is not one of {', '.join(_RANK)}")
        if not self.judged and self.status != UNKNOWN:
            raise ValueError(f"property {self.name}: a {self.status} result is judged (only unknown is not)")
        object.__setattr__(self, "jobs", tuple(sorted(set(self.jobs))))
        object.__setattr__(self, "evidence", " ".join(str(self.evidence).splitlines()))

    def to_dict(self) -> dict[str, object]:
        out = {"status": self.status, "count": self.count, "jobs": list(self.jobs), "evidence": self.evidence}
        if self.cause:
            out["caused_by"] = self.cause
        if not self.judged:
            out["judged"] = False
        if self.event is not None:
            out["event"] = self.event.to_dict()
        return out


def worst(statuses: Iterable[str]) -> str:
    """The worst of *statuses*: violated > unknown > held. Nothing to compose is unknown.

    Raises :class:`ValueError` on a status that is not one of the three.
    """
    out = None
    for s in statuses:
        if s not in _RANK:
            raise ValueError(f"status {s!r} is not one of {', '.join(_RANK)}")
        if out is None or _RANK[s] > _RANK[out]:
            out = s
    return UNKNOWN if out is None else out


def violated_names(results: dict[str, Result]) -> list[str]:
    """The names of the violated properties among *results*, in order: the one place it is computed."""
    return [n for n, r in results.items() if r.status == VIOLATED]


def not_judged_names(results: dict[str, Result]) -> list[str]:
    """The names of the properties not judged for the design (unknown, ``judged`` False)."""
    return [n for n, r in results.items() if r.status == UNKNOWN and not r.judged]


def undecided_names(results: dict[str, Result]) -> list[str]:
    """The names of the properties that could not decide (``unknown``) and are judged for the design:
    what ``--strict`` fails on. A property not judged for the design (``judged`` False) is left out."""
    return [n for n, r in results.items() if r.status == UNKNOWN and r.judged]


def aggregate(runs: Sequence[dict[str, Result]]) -> dict[str, Result]:
    """Per property, the verdict over many runs of a search (properties in first-seen order).

    Violated if any run violated it (count, jobs, evidence and cause from the *first* violating run
    that no other property explains, else the first; the evidence prefixed "in N of M runs: "); else
    unknown if any run could not decide (evidence from the first run judged that could not, else the
    first; not judged only when no run that could not decide was judged); else held. M counts the runs
    that checked the property.
    """
    names: dict[str, None] = {}
    for results in runs:
        names.update(dict.fromkeys(results))
    out = {}
    for name in names:
        seen = [r[name] for r in runs if name in r]
        m = len(seen)
        bad = [r for r in seen if r.status == VIOLATED]
        unsure = [r for r in seen if r.status == UNKNOWN]
        if bad:
            # Caused only where every violating run explains it: one unexplained run is a finding, and
            # its evidence is the one shown.
            first = next((r for r in bad if not r.cause), bad[0])
            out[name] = Result(name, VIOLATED, first.count, first.jobs,
                               f"in {len(bad)} of {m} runs: {first.evidence}", cause=first.cause,
                               event=first.event)
        elif unsure:
            first = next((r for r in unsure if r.judged), unsure[0])
            out[name] = Result(name, UNKNOWN, 0, (),
                               f"unknown in {len(unsure)} of {m} runs: {first.evidence}", judged=first.judged)
        else:
            out[name] = Result(name, HELD, 0, (), f"held in all {m} runs")
    return out


# --- helpers for the properties ---------------------------------------------------------------------

def held(name: str, evidence: str) -> Result:
    return Result(name, HELD, evidence=evidence)


def unknown(name: str, evidence: str) -> Result:
    return Result(name, UNKNOWN, evidence=evidence)


def not_judged(name: str, evidence: str) -> Result:
    """Unknown because the design does not declare what the property needs (the module docstring):
    *evidence* says what, and what would let it be judged; prefixed "not judged for this design: "."""
    return Result(name, UNKNOWN, evidence=f"not judged for this design: {evidence}", judged=False)


def violated(name: str, lines: Sequence[str], jobs: Iterable[int], *, count: int | None = None,
             suffix: str = "", event: Mark | None = None) -> Result:
    """A violation: *lines* are the offences, one each (count defaults to how many); the evidence
    is the first of them and how many more, then *suffix*; *event*: the first offence's event."""
    lines = list(lines)
    evidence = lines[0] if lines else "violated"
    if len(lines) > 1:
        evidence += f" (and {len(lines) - 1} more)"
    return Result(name, VIOLATED, len(lines) if count is None else count,
                  tuple(j for j in jobs if j is not None), evidence + suffix, event=event)


def over_limits(counts: dict[int, int], limit_of: Callable[[int], int | None],
                describe: Callable[[int, int, int], str]) -> tuple[list[str], list[int], list[int]]:
    """Per job, in id order: a line for every count above its limit, the offending jobs, and the
    jobs with no limit to compare against (the caller decides: unknown)."""
    lines = []
    jobs = []
    missing = []
    for job, n in sorted(counts.items()):
        limit = limit_of(job)
        if limit is None:
            missing.append(job)
        elif n > limit:
            lines.append(describe(job, n, limit))
            jobs.append(job)
    return lines, jobs, missing


def is_empty(history: History) -> bool:
    """No jobs table and no execution: nothing any property can decide from."""
    return not history.jobs and not history.executions()


@dataclass(frozen=True)
class Property:
    """A registered property: its name, its group (``--fail-on``/``--allow`` name it), its position in
    the design's table (:data:`properties.PROPERTIES` order) and its check, ``History -> Result``."""

    name: str
    group: str
    position: int
    check: Callable[[History], Result]


Check = Callable[[History, str], Result]
"""A property's function, ``fn(history, name)``, as :func:`decides` registers it."""

REGISTRY: dict[str, Property] = {}
"""Every property, by name, as :func:`decides` registered it (in import order: ``properties/__init__``
imports every property module and orders them by ``position``)."""


def decides(name: str, *, group: str, position: int) -> Callable[[Check], Callable[[History], Result]]:
    """Register the function as the property *name* of *group*, at *position* in the design's table.

    The function is called as ``fn(history, name)``: the name it puts on its results is the one given
    here. An empty history is unknown before it runs. A name or a position registered twice raises
    :class:`ValueError` at registration.
    """

    def wrap(fn: Check) -> Callable[[History], Result]:
        where = f"{fn.__module__}.{fn.__qualname__}"
        if not name or not group:
            raise ValueError(f"{where}: a property needs a name and a group")
        if name in REGISTRY:
            raise ValueError(f"property {name!r} is registered twice: by {_where(REGISTRY[name])} "
                             f"and {where}")
        same = [p for p in REGISTRY.values() if p.position == position]
        if same:
            raise ValueError(f"property {name!r} ({where}) takes position {position} of {same[0].name!r}")

        @functools.wraps(fn)
        def check(history: History) -> Result:
            if is_empty(history):
                return unknown(name, "empty history: no jobs and no executions")
            return fn(history, name)

        REGISTRY[name] = Property(name, group, position, check)
        return check

    return wrap


def _where(p: Property) -> str:
    fn = getattr(p.check, "__wrapped__", p.check)
    return f"{fn.__module__}.{fn.__qualname__}"
