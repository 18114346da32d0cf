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
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

from ...core.history import History
from ...core.schedule import JOB_POINTS, POINTS, Schedule
from ...properties import check
from ...properties.strategies import schedules
from ...workers import load_design
from ..progress import step
from . import smallscope
from .outcome import Run, SearchOutcome

__all__ = ["Run", "SearchOutcome", "sample_schedules", "search"]

SHRINK_RUNS = 40  # real runs spent shrinking at most; then candidates are not run (treated as passing)
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pg-job-chaos"


class Violation(AssertionError):
    """Raised inside the Hypothesis test when a run violates a property."""


def database_dir(key: str) -> Path:
    return CACHE_DIR / "hypothesis" / hashlib.sha256(key.encode()).hexdigest()[:16]


def search(run: Callable[[Schedule], History], *, faults, design: str, tenant_mode: str, examples: int,
           seed: int | None, time_scale: float, workers: int | None = None,
           progress: Callable[[str], None] = lambda s: None, small_scope: bool = True,
           budget: float | None = None, database=None, shard: tuple[int, int] | None = None,
           run_many: Callable[[list[Schedule]], list[History]] | None = None, parallel: int = 1,
           design_options: dict[str, str] | None = None) -> SearchOutcome:
    """Search for a schedule that violates a property. *run* executes one schedule.

    First the small-scope pass (:mod:`harness.smallscope`, outside the example budget), then
    *examples* random schedules from Hypothesis, shrinking the first violation it finds (with a
    *seed*, reproducibly -- and then, as Hypothesis does, without its example database). *budget*
    (seconds) stops both passes from starting new schedules once spent; shrinking and the final
    replay still run. *database* is Hypothesis's example database (default: a directory under
    :data:`CACHE_DIR`); *shard* ``(i, n)`` runs the i-th of n disjoint parts of the search.
    *run_many* (with *parallel* > 1, see :mod:`harness.slots`) runs the schedules known in advance --
    the small-scope pass and the examples after the first failure -- *parallel* at a time.
    *design_options* (``--design-option``) go into every schedule, so that a saved one replays with them.
    """
    def configured(s: Schedule) -> Schedule:
        return s.replace(design_options=dict(design_options)) if design_options else s

    out = SearchOutcome()
    cache: dict[str, Run] = {}
    state = {"after_failure": 0, "last_failing": None, "generated": 0, "phase": "example"}
    t0 = time.monotonic()
    stop_at = t0 + budget if budget is not None else None

    def spent() -> bool:
        if stop_at is not None and time.monotonic() >= stop_at:
            out.budget_spent = True
        return out.budget_spent

    def record(schedule: Schedule, history: History, seconds: float, label: str) -> None:
        r = Run(schedule, check(history), history, seconds, label)
        cache[schedule.to_json()] = r
        out.runs.append(r)
        what = label or (f"{len(schedule.jobs)} jobs, {schedule.workers} workers, faults "
                         f"{','.join(schedule.faults()) or 'none'}")
        phase = state["phase"]
        # the bar counts examples against the budget; shrinking has no known end
        step(progress, f"{phase} {len(out.runs)}: {what} -> "
                       f"{'violated ' + ','.join(r.violated) if r.violated else 'all held'} ({r.seconds:.1f} s)",
             done=len(out.runs), total=None if phase == "shrinking" else max(examples + out.small_scope_runs,
                                                                           len(out.runs)))
        if r.violated and out.first_failure_seconds is None:
            out.first_failure_seconds = time.monotonic() - t0

    def execute(schedule: Schedule, label: str = "") -> Run:
        key = schedule.to_json()
        if key not in cache:
            t = time.monotonic()
            record(schedule, run(schedule), time.monotonic() - t, label)
        return cache[key]

    def execute_all(batch: list[tuple[str, Schedule]]) -> int:
        """Run a batch known in advance, *parallel* at a time where slots exist; stops at the budget."""
        batch = [(label, s) for label, s in batch if s.to_json() not in cache]
        done = 0
        width = parallel if run_many is not None and parallel > 1 else 1
        for k in range(0, len(batch), width):
            if spent():
                break
            chunk = batch[k:k + width]
            if width == 1:
                execute(chunk[0][1], chunk[0][0])
            else:
                for (label, s), h in zip(chunk, run_many([s for _, s in chunk]), strict=True):
                    record(s, h, h.t1 - h.t0, label)
            done += len(chunk)
        return done

    index, shards = shard or (0, 1)
    if small_scope:
        state["phase"] = "small scope"
        cases = smallscope.schedules(faults=faults, design=design, tenant_mode=tenant_mode,
                                     time_scale=time_scale, workers=workers, points=points_of([design]))
        out.small_scope_runs = execute_all([(label, configured(c)) for k, (label, c) in enumerate(cases)
                                            if k % shards == index])
        state["phase"] = "example"

    strategy = schedules(faults=faults, design=design, tenant_mode=tenant_mode, time_scale=time_scale,
                         workers=workers, points=points_of([design])).map(configured)
    key = f"{json.dumps(design_options or {}, sort_keys=True)}|{design}|{tenant_mode}|{','.join(sorted(f.name for f in faults))}|{time_scale}|{workers}"
    if database is None:
        database = DirectoryBasedExampleDatabase(database_dir(key))
    share = -(-examples // shards)  # this shard's part of the example budget

    @settings(max_examples=share, deadline=None, database=database,
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, report_multiple_bugs=False,
              phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink], print_blob=False)
    @given(strategy)
    def test(schedule: Schedule) -> None:
        if state["last_failing"] is not None and schedule.to_json() not in cache:
            state["after_failure"] += 1
            if state["after_failure"] > SHRINK_RUNS:
                out.shrink_budget_spent = True
                return  # budget spent: not run, so not a counterexample
        if state["last_failing"] is None and schedule.to_json() not in cache and spent():
            return  # --budget spent: generated, not run (the report says so)
        r = execute(schedule)
        if state["last_failing"] is None:
            state["generated"] += 1
        if r.violated:
            state["last_failing"], state["phase"] = r, "shrinking"
            raise Violation(", ".join(r.violated))

    if seed is not None:
        # Hazard: Hypothesis's @seed also switches the example database off -- a seeded search
        # neither reads nor saves examples. Shards that share a database must run unseeded.
        test = hypothesis_seed(seed * shards + index)(test)
    try:
        test()
    except Violation:
        pass
    except Flaky:
        out.flaky = True
    if state["last_failing"] is not None and state["generated"] < share and not spent():
        # Hypothesis stops generating at the first failure; the rest of the example budget still
        # runs, so that every property is judged on as many schedules as the user asked for.
        rest = sample_schedules(faults=faults, design=design, tenant_mode=tenant_mode,
                                count=share - state["generated"], seed=seed, time_scale=time_scale,
                                workers=workers)
        progress(f"exploring the other {len(rest)} examples of the budget")
        state["phase"] = "example"
        execute_all([("", configured(s)) for s in rest])
    out.seconds = time.monotonic() - t0
    # The simplest failing run observed: the small-scope pass's are already minimal, Hypothesis's shrunk.
    failing = [r for r in out.runs if r.violated]
    out.counterexample = min(failing, key=lambda r: r.size) if failing else None
    if out.counterexample is not None:
        progress("replaying the counterexample once more")
        history = run(out.counterexample.schedule)
        out.replayed = Run(out.counterexample.schedule, check(history), history, 0.0)
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
