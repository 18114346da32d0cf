"""The Hypothesis search: generate schedules, run each, check every property, shrink a violation.

Each example is a real run (forked workers, real PostgreSQL), so the search keeps its own
budgets: Hypothesis's example database lives under our cache directory (never the user's
working directory), a run is bounded by the supervisor's deadline, and shrinking stops running
new candidates after :data:`SHRINK_RUNS` runs -- the counterexample reported is then the
smallest *observed* failing schedule, which is always a real failing run. The shrunk schedule
is replayed once more, uncached: if it does not fail again, the report says "flaky".
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

import properties
from core.history import History
from core.schedule import JOB_POINTS, POINTS, Schedule
from properties.strategies import schedules
from workers import load_design

SHRINK_RUNS = 40  # real runs spent shrinking at most; then candidates are not run (treated as passing)
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pg-job-chaos"


class Violation(AssertionError):
    """Raised inside the Hypothesis test when a run violates a property."""


@dataclass
class Run:
    schedule: Schedule
    results: dict
    history: History
    seconds: float

    @property
    def violated(self) -> list[str]:
        return [n for n, r in self.results.items() if r.status == properties.VIOLATED]


@dataclass
class SearchOutcome:
    runs: list[Run] = field(default_factory=list)
    counterexample: Run | None = None
    replayed: Run | None = None  # the counterexample run again, uncached
    flaky: bool = False
    shrink_budget_spent: bool = False
    seconds: float = 0.0
    first_failure_seconds: float | None = None

    def aggregate(self) -> dict:
        return properties.aggregate([r.results for r in self.runs])

    def smallest_for(self, name: str) -> Run | None:
        """The smallest observed schedule that violated *name* (jobs, then workers, then faults)."""
        hits = [r for r in self.runs if name in r.violated]
        return min(hits, key=lambda r: (len(r.schedule.jobs), r.schedule.workers, len(r.schedule.faults()),
                                        len(r.schedule.events)), default=None)


def database_dir(key: str) -> Path:
    return CACHE_DIR / "hypothesis" / hashlib.sha256(key.encode()).hexdigest()[:16]


def search(run: Callable[[Schedule], History], *, faults, design: str, tenant_mode: str, examples: int,
           seed: int | None, time_scale: float, workers: int | None = None,
           progress: Callable[[str], None] = lambda s: None) -> SearchOutcome:
    """Search for a schedule that violates a property. *run* executes one schedule."""
    out = SearchOutcome()
    cache: dict[str, Run] = {}
    state = {"after_failure": 0, "last_failing": None, "generated": 0, "phase": "example"}
    t0 = time.monotonic()

    def execute(schedule: Schedule) -> Run:
        key = schedule.to_json()
        if key not in cache:
            t = time.monotonic()
            history = run(schedule)
            r = Run(schedule, properties.check(history), history, time.monotonic() - t)
            cache[key] = r
            out.runs.append(r)
            phase = state["phase"]
            progress(f"{phase} {len(out.runs)}: {len(schedule.jobs)} jobs, {schedule.workers} workers, "
                     f"faults {','.join(schedule.faults()) or 'none'} -> "
                     f"{'violated ' + ','.join(r.violated) if r.violated else 'all held'} ({r.seconds:.1f} s)")
        return cache[key]

    strategy = schedules(faults=faults, design=design, tenant_mode=tenant_mode, time_scale=time_scale,
                         workers=workers, points=points_of([design]))
    key = f"{design}|{tenant_mode}|{','.join(sorted(f.name for f in faults))}|{time_scale}|{workers}"

    @settings(max_examples=examples, deadline=None, database=DirectoryBasedExampleDatabase(database_dir(key)),
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, report_multiple_bugs=False,
              phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink], print_blob=False)
    @given(strategy)
    def test(schedule: Schedule) -> None:
        if state["last_failing"] is not None and schedule.to_json() not in cache:
            state["after_failure"] += 1
            if state["after_failure"] > SHRINK_RUNS:
                out.shrink_budget_spent = True
                return  # budget spent: not run, so not a counterexample
        r = execute(schedule)
        if state["last_failing"] is None:
            state["generated"] += 1
        if r.violated:
            if state["last_failing"] is None:
                out.first_failure_seconds = time.monotonic() - t0
            state["last_failing"], state["phase"] = r, "shrinking"
            raise Violation(", ".join(r.violated))

    if seed is not None:
        test = hypothesis_seed(seed)(test)
    try:
        test()
    except Violation:
        out.counterexample = state["last_failing"]
    except Flaky:
        out.flaky = True
        out.counterexample = state["last_failing"]
    if out.counterexample is not None and state["generated"] < examples:
        # Hypothesis stops generating at the first failure; the rest of the example budget still
        # runs, so that every property is judged on as many schedules as the user asked for.
        rest = sample_schedules(faults=faults, design=design, tenant_mode=tenant_mode,
                                count=examples - state["generated"], seed=seed, time_scale=time_scale,
                                workers=workers)
        progress(f"exploring the other {len(rest)} examples of the budget")
        state["phase"] = "example"
        for schedule in rest:
            execute(schedule)
    out.seconds = time.monotonic() - t0
    if out.counterexample is not None:
        progress("replaying the shrunk schedule once more")
        history = run(out.counterexample.schedule)
        out.replayed = Run(out.counterexample.schedule, properties.check(history), history, 0.0)
        out.runs.append(out.replayed)
        if not set(out.counterexample.violated) & set(out.replayed.violated):
            out.flaky = True
    return out


def points_of(designs) -> tuple[str, ...]:
    """The strike points any of *designs* reaches (by name or plug-in spec), in ``POINTS`` order."""
    reached = {p for d in designs for p in getattr(load_design(d), "points", JOB_POINTS)}
    return tuple(p for p in POINTS if p in reached)


def sample_schedules(*, faults, design: str, tenant_mode: str, count: int, seed: int | None,
                     time_scale: float, workers: int | None = None, designs=None) -> list[Schedule]:
    """*count* schedules drawn from the strategy without running anything (for ``--compare``:
    *designs*, whose strike points they may use; default *design* alone)."""
    drawn: list[Schedule] = []

    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @given(schedules(faults=faults, design=design, tenant_mode=tenant_mode, time_scale=time_scale,
                     workers=workers, points=points_of(designs or [design])))
    def draw(schedule):
        drawn.append(schedule)

    hypothesis_seed(seed if seed is not None else 0)(draw)()
    seen, unique = set(), []
    for s in drawn:
        if s.to_json() not in seen:
            seen.add(s.to_json())
            unique.append(s)
    return unique
