"""What a search found: every run with its verdicts, the counterexample, and fault coverage."""

from __future__ import annotations

import dataclasses
import enum
from collections import defaultdict
from dataclasses import dataclass, field

from ...core.coverage import fault_fates, retry_gaps
from ...core.history import History
from ...core.schedule import Schedule
from ...properties import VIOLATED, aggregate, violated_names

# How a violated property's schedule came to be (Shown.how)
SHRUNK = "shrunk"  # shrunk for the property until no candidate violated it any more
BUDGET_SPENT = "shrink budget spent"  # shrinking stopped at the search's shrink budget: smallest observed
AS_FOUND = "as found"  # not gated (--fail-on/--allow): the smallest observed run, not shrunk


def size(s: Schedule) -> tuple:
    """Smaller is simpler: jobs, then workers, then distinct faults, then events, then jobs with a fault."""
    return (len(s.jobs), s.workers, len(s.faults()), len(s.events), sum(j.fault is not None for j in s.jobs))


class Phase(enum.Enum):
    """A search's phases, in order (Hypothesis's runner names its own the same way)."""

    SMALL_SCOPE = "small scope"  # the smallest schedules for every fault at every point, before generation
    GENERATE = "generate"  # Hypothesis draws schedules until one violates a property
    SHRINK = "shrinking"  # Hypothesis shrinks that one
    REST = "rest"  # the rest of the example budget, drawn and run
    REPLAY = "replay"  # the counterexample once more, uncached

    @property
    def label(self) -> str:
        """What a progress line calls a run of this phase."""
        return {Phase.GENERATE: "example", Phase.REST: "example"}.get(self, self.value)


class ExitReason(enum.Enum):
    """Why a search stopped."""

    EXAMPLES = "every example of the budget ran; nothing violated"
    BUDGET = "--budget ran out before the example budget; nothing violated"
    SHRUNK = "a violation was found and shrunk"
    SHRINK_BUDGET = "a violation was found; shrinking stopped at its run budget (the smallest observed)"


@dataclass
class Run:
    schedule: Schedule
    results: dict
    history: History
    seconds: float
    label: str = ""  # the small-scope pass names its schedules ("crash at mid-work; one job, two workers")

    @property
    def violated(self) -> list[str]:
        return violated_names(self.results)

    def failing(self, gate) -> list[str]:
        """The violated properties that fail a run under *gate* (see :func:`properties.gate`)."""
        return [n for n in self.violated if n in gate]

    @property
    def size(self) -> tuple:
        """:func:`size` of its schedule."""
        return size(self.schedule)


@dataclass
class Shown:
    """The run a report shows for one violated property: its evidence, its schedule (saved), its
    timeline; ``how`` it was reached (:data:`SHRUNK`, :data:`BUDGET_SPENT` or :data:`AS_FOUND`)."""

    run: Run
    how: str


@dataclass
class SearchOutcome:
    runs: list[Run] = field(default_factory=list)
    counterexample: Run | None = None
    replayed: Run | None = None  # the counterexample run again, uncached (the first of :attr:`replays`)
    replays: list[Run] = field(default_factory=list)  # every replay of the counterexample, uncached
    reproduced: int = 0  # how many of :attr:`replays` failed the gate again on a property it failed
    flaky: bool = False  # fewer than every replay failed again
    shrink_budget_spent: bool = False
    budget_spent: bool = False  # --budget ran out before the example budget did
    small_scope_runs: int = 0
    statement_points: list = field(default_factory=list)  # (point, bound) the small-scope pass struck at
    seconds: float = 0.0
    first_failure_seconds: float | None = None
    first_failure_runs: int | None = None  # runs made until the first that failed the gate, that one included
    exit_reason: ExitReason | None = None  # set when the search ends
    gate: tuple[str, ...] | None = None  # the properties whose violation failed a run (None: all)
    # every violated property's own run, in PROPERTIES order (harness/engine/shrink.py)
    shown: dict[str, Shown] = field(default_factory=dict)
    shrink_runs: int = 0  # new runs spent shrinking, Hypothesis's and shrink.py's together

    def aggregate(self) -> dict:
        """Every property's verdict over all runs; a violated property's count, jobs, evidence and event
        from its :attr:`shown` run, so that the row and the schedule it names agree."""
        out = aggregate([r.results for r in self.runs])
        for name, shown in self.shown.items():
            own = shown.run.results.get(name)
            if own is None or own.status != VIOLATED or out[name].status != VIOLATED:
                continue
            bad = sum(r.results[name].status == VIOLATED for r in self.runs if name in r.results)
            m = sum(name in r.results for r in self.runs)
            out[name] = dataclasses.replace(own, evidence=f"in {bad} of {m} runs: {own.evidence}")
        return out

    def choose(self, gate) -> Run | None:
        """The counterexample: the :attr:`shown` run of the first violated property of *gate* (in the
        table's order); sets :attr:`counterexample` and :attr:`shrink_budget_spent` (its shrinking cut)."""
        first = next((self.shown[n] for n in gate if n in self.shown), None)
        self.counterexample = first.run if first is not None else None
        self.shrink_budget_spent = first is not None and first.how == BUDGET_SPENT
        return self.counterexample

    def smallest_for(self, name: str) -> Run | None:
        """The smallest observed schedule that violated *name*."""
        return min((r for r in self.runs if name in r.violated), key=lambda r: r.size, default=None)

    def coverage(self) -> dict[str, dict[str, int]]:
        """Per fault and point, in how many runs it struck (a fault placed but never struck counts 0)."""
        out: dict[str, dict[str, int]] = defaultdict(dict)
        for r in self.runs:
            struck = set()
            for f in fault_fates(r.history):
                out[f["fault"]].setdefault(f["point"], 0)
                if f["fate"] == "struck":
                    struck.add((f["fault"], f["point"]))
            for fault, point in struck:
                out[fault][point] += 1
        return {f: dict(sorted(points.items())) for f, points in sorted(out.items())}

    def retry_spacing(self) -> dict:
        """The retry gaps of every run (``core.coverage.retry_gaps``, in leases): how many, and their
        spread."""
        gaps = sorted(g for r in self.runs for g in retry_gaps(r.history))
        if not gaps:
            return {}
        return {"retries": len(gaps), "min": round(gaps[0], 3), "median": round(gaps[len(gaps) // 2], 3),
                "max": round(gaps[-1], 3)}

    def no_strike_point(self, faults) -> bool:
        """True when faults were allowed and no execution of any run reached a single strike point:
        the design never runs the harness's job body (or never calls its points), so no fault could
        strike and nothing was tested. A fault that simply did not fire in a run is coverage, not this."""
        return bool(faults) and bool(self.runs) and not any(r.history.points_reached() for r in self.runs)

    def never_struck(self, faults, coverage: dict | None = None) -> list[str]:
        """Allowed faults that struck in no run of the whole search: the search proved nothing about them.
        *coverage*: :meth:`coverage`'s result, when the caller has it already (it reads every history)."""
        cov = self.coverage() if coverage is None else coverage
        return [f.name for f in faults if not any(cov.get(f.name, {}).values())]
