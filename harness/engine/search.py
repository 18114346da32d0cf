"""The Hypothesis search: generate schedules, run each, check every property, shrink a violation.

Each example is a real run (forked workers, real PostgreSQL), so the search keeps its own
budgets: Hypothesis's example database lives under our cache directory (never the user's
working directory), a run is bounded by the supervisor's deadline, and shrinking -- Hypothesis's of
the first violation, then every violated gated property's own (:mod:`harness.engine.shrink`) -- stops
running new candidates after :data:`SHRINK_RUNS` runs in all: a schedule shown is then the smallest
*observed* one, always a real run. The counterexample is the first violated gated property's (in the
table's order); it is replayed *replays* times more (default once), uncached: the report says in how many
it failed again, and "flaky" when that is not every one.

Its named phases (:class:`Phase`), as Hypothesis's own runner's: the small-scope pass, generation,
shrinking, the rest of the example budget, the replay. Why it stopped: one :class:`ExitReason`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import Phase as HypothesisPhase
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

from ...core import misdeclared
from ...core.history import History
from ...core.schedule import POINTS, Schedule
from ...properties import PROPERTIES, check
from ...properties.strategies import schedules
from ...workers.design import DesignHandle
from ..progress import step
from . import shrink, smallscope
from .outcome import ExitReason, Phase, Run, SearchOutcome

__all__ = ["ExitReason", "Phase", "Run", "RunOne", "Search", "SearchOutcome", "sample_schedules", "search"]

# ONE shrink budget per search: new runs spent shrinking, Hypothesis's and every property's together;
# then candidates are not run (treated as passing). Hypothesis's shrinking may spend 40 of it, as before
# (a planted bug, HeartbeatAnyAttempt, is met only while Hypothesis shrinks), the properties' the rest.
SHRINK_RUNS = 60
HYPOTHESIS_SHRINK = 40
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pg-job-chaos"


class RunOne(Protocol):
    """What runs one schedule of a search (``Runner.run``): given the design's handle the search was
    given, never left to find it again by the schedule's design name."""

    def __call__(self, schedule: Schedule, *, design: DesignHandle) -> History: ...


class Violation(AssertionError):
    """Raised inside the Hypothesis test when a run violates a property."""


def database_dir(key: str) -> Path:
    return CACHE_DIR / "hypothesis" / hashlib.sha256(key.encode()).hexdigest()[:16]


class Search:
    """One search of one design (see :func:`search` for the arguments). :meth:`run` goes through the
    phases once and returns the :class:`SearchOutcome`. *design* is the handle the caller built
    (:func:`workers.load_design`): its spec and options go into every schedule, its points are where
    faults may strike, and every run of this process is given it (*run_many*'s slots, in their own
    processes, find theirs by the schedule's spec and options: the caller gave them the same handle)."""

    def __init__(self, run: RunOne, *, faults, design: DesignHandle, tenant_mode: str,
                 examples: int, seed: int | None, time_scale: float, workers: int | None = None,
                 progress: Callable[[str], None] = lambda s: None, small_scope: bool = True,
                 budget: float | None = None, database=None, shard: tuple[int, int] | None = None,
                 run_many: Callable[[list[Schedule]], list[History]] | None = None, parallel: int = 1,
                 gate: tuple[str, ...] | None = None, workload: str | None = None,
                 stop_at_first: bool = False, grace: float | None = None, replays: int = 1):
        self.workload = workload  # a declared tenant workload every drawn schedule carries (issue 38)
        self.grace = grace  # --grace: the deploy fault's grace in every schedule (article seconds)
        # stop starting new schedules once one fails the gate (a known bug's hunt, issue 48): the rest
        # of the small-scope pass and of the examples is not run; the failure is still shrunk and replayed
        self.stop_at_first = stop_at_first
        if replays < 1:
            raise ValueError("replays must be at least 1")
        self.replays = replays  # how many times the counterexample is run again (issue 48)
        self._run = run
        self._run_many = run_many
        self.progress = progress
        # the properties whose violation fails a run (--fail-on/--allow): what is shrunk and kept
        self.gate = tuple(gate) if gate is not None else tuple(PROPERTIES)
        self.faults = faults
        self.design = design.spec
        self.handle = design  # what each run is given (the schedules carry its spec and options)
        self.tenant_mode = tenant_mode
        self.examples = examples
        self.seed = seed
        self.time_scale = time_scale
        self.workers = workers
        self.small_scope = small_scope
        self.budget = budget
        self.database = database
        self.index, self.shards = shard or (0, 1)
        self.width = parallel if run_many is not None and parallel > 1 else 1
        self.design_options = dict(design.options)
        self.points = tuple(p for p in POINTS if p in design.points)
        self.statements: list[tuple[str, bool]] = []  # statement points the small-scope runs showed
        self.share = -(-examples // self.shards)  # this shard's part of the example budget
        self.out = SearchOutcome(gate=self.gate)
        self.phase = Phase.GENERATE
        self._cache: dict[str, Run] = {}
        self._generated = 0
        self._last_failing: Run | None = None
        self._warned: set[str] = set()  # the design's mistakes already said (core/misdeclared.py)
        self._t0 = 0.0
        self._stop_at: float | None = None

    # -- running schedules ---------------------------------------------------------------------------

    def _configured(self, s: Schedule) -> Schedule:
        if self.grace is not None:
            s = s.replace(timing=dataclasses.replace(s.timing, grace=self.grace))
        return s.replace(design_options=dict(self.design_options)) if self.design_options else s

    def _spent(self) -> bool:
        if self._stop_at is not None and time.monotonic() >= self._stop_at:
            self.out.budget_spent = True
        return self.out.budget_spent

    def _found(self) -> bool:
        """With *stop_at_first*: a run has failed the gate, so no new schedule starts (but shrinking)."""
        return self.stop_at_first and self.out.first_failure_seconds is not None

    def _record(self, schedule: Schedule, history: History, seconds: float, label: str) -> Run:
        r = Run(schedule, check(history), history, seconds, label)
        self._cache[schedule.to_json()] = r
        self.out.runs.append(r)
        what = label or (f"{len(schedule.jobs)} jobs, {schedule.workers} workers, faults "
                         f"{','.join(schedule.faults()) or 'none'}")
        # the bar counts examples against the budget; shrinking has no known end
        total = None if self.phase is Phase.SHRINK else max(self.examples + self.out.small_scope_runs,
                                                            len(self.out.runs))
        step(self.progress, f"{self.phase.label} {len(self.out.runs)}: {what} -> "
                            f"{'violated ' + ','.join(r.violated) if r.violated else 'all held'} "
                            f"({r.seconds:.1f} s)", done=len(self.out.runs), total=total)
        if r.failing(self.gate) and self.out.first_failure_seconds is None:
            self.out.first_failure_seconds = time.monotonic() - self._t0
            self.out.first_failure_runs = len(self.out.runs)
        # What the design declared wrong, said as soon as a run shows it (its first run, usually): the
        # verdicts that follow from it are not the design's (the report repeats it after the table).
        for f in misdeclared.findings(history):
            if not f.held and f.check not in self._warned:
                self._warned.add(f.check)
                self.progress(f.warning())
        return r

    def _execute(self, schedule: Schedule, label: str = "") -> Run:
        key = schedule.to_json()
        if key not in self._cache:
            t = time.monotonic()
            self._record(schedule, self._run(schedule, design=self.handle), time.monotonic() - t, label)
        return self._cache[key]

    def _execute_all(self, batch: list[tuple[str, Schedule]]) -> int:
        """Run a batch known in advance, ``parallel`` at a time where slots exist; stops at the budget."""
        batch = [(label, s) for label, s in batch if s.to_json() not in self._cache]
        done = 0
        for k in range(0, len(batch), self.width):
            if self._spent() or self._found():
                break
            chunk = batch[k:k + self.width]
            run_many = self._run_many
            if self.width == 1 or run_many is None:  # a width above 1 only with run_many
                self._execute(chunk[0][1], chunk[0][0])
            else:
                for (label, s), h in zip(chunk, run_many([s for _, s in chunk]), strict=True):
                    self._record(s, h, h.t1 - h.t0, label)
            done += len(chunk)
        return done

    # -- the phases ----------------------------------------------------------------------------------

    def run(self) -> SearchOutcome:
        self._t0 = time.monotonic()
        self._stop_at = self._t0 + self.budget if self.budget is not None else None
        if self.small_scope:
            self._small_scope()
        if not self._found():
            self._generate_and_shrink()
        if (self._last_failing is not None and self._generated < self.share and not self._spent()
                and not self._found()):
            self._rest()
        self.phase = Phase.SHRINK  # every violated property's own run (harness/engine/shrink.py)
        shrink.per_property(self.out, self.gate, self._execute, seen=lambda s: s.to_json() in self._cache,
                            limit=SHRINK_RUNS)
        self.out.seconds = time.monotonic() - self._t0
        if (ce := self.out.choose(self.gate)) is not None:
            self._replay(ce)
        self.out.exit_reason = self._exit_reason()
        return self.out

    def _small_scope(self) -> None:
        self.phase = Phase.SMALL_SCOPE
        self.out.small_scope_runs = 0
        common = {"faults": self.faults, "design": self.design, "tenant_mode": self.tenant_mode,
                  "time_scale": self.time_scale, "workers": self.workers}
        self._run_cases(smallscope.schedules(points=self.points, **common))
        # What the runs showed of the design's own statements: strike between them too.
        self.statements = [p for r in self.out.runs for p in r.history.statements()]
        self.out.statement_points = smallscope.ranked(self.statements)
        # restart and deploy at the design's recovery statements first (issue 47, item 3)
        # (a recovery statement the fault-free runs never sent is struck after a strand)
        plain = [p for r in self.out.runs if not r.schedule.faults() for p, _ in r.history.statements()]
        self._run_cases(smallscope.recovery_schedules(self.statements, self.handle.recovery_statements,
                                                      plain=plain, **common))
        self._run_cases(smallscope.statement_schedules(self.statements, **common))
        # the faults that end or cut a worker at every statement point seen (issue 36, item 1)
        self._run_cases(smallscope.cut_schedules(self.statements, progress=self.progress, **common))
        # schedules that spend a job's attempts before the strike (issue 36, item 3)
        self._run_cases(smallscope.last_attempt_schedules(self.statements, **common))

    def _run_cases(self, cases) -> None:
        """Run this shard's share of the small-scope *cases* (label, schedule)."""
        mine = [(label, c) for k, (label, c) in enumerate(cases) if k % self.shards == self.index]
        self.out.small_scope_runs += self._execute_all([(label, self._configured(c)) for label, c in mine])

    def _generate_and_shrink(self) -> None:
        """Hypothesis generates until the first violation, then shrinks it (both phases in its runner)."""
        self.phase = Phase.GENERATE
        strategy = schedules(faults=self.faults, design=self.design, tenant_mode=self.tenant_mode,
                             time_scale=self.time_scale, workers=self.workers, points=self.points,
                             statements=self._drawn_statements(),
                             cut_statements=smallscope.cut_points(self.statements, cap=smallscope.CUT_POINTS),
                             workload=self.workload).map(self._configured)
        key = (f"{json.dumps(self.design_options, sort_keys=True)}|{self.design}|{self.tenant_mode}|"
               f"{','.join(sorted(f.name for f in self.faults))}|{self.time_scale}|{self.workers}")
        if self.workload:
            key += f"|workload={self.workload}"
        if self.grace is not None:
            key += f"|grace={self.grace:g}"
        if self.gate != tuple(PROPERTIES):  # what the database keeps is what failed under this gate
            key += f"|gate={','.join(self.gate)}"
        database = (self.database if self.database is not None
                    else DirectoryBasedExampleDatabase(database_dir(key)))

        @settings(max_examples=self.share, deadline=None, database=database,
                  suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                  report_multiple_bugs=False,
                  phases=[HypothesisPhase.explicit, HypothesisPhase.reuse, HypothesisPhase.generate,
                          HypothesisPhase.shrink], print_blob=False)
        @given(strategy)
        def test(schedule: Schedule) -> None:
            new = schedule.to_json() not in self._cache
            if self._last_failing is not None and new:
                if self.out.shrink_runs >= HYPOTHESIS_SHRINK:
                    return  # its share of the budget spent: not run, so not a counterexample
                self.out.shrink_runs += 1
            if self._last_failing is None and new and self._spent():
                return  # --budget spent: generated, not run (the report says so)
            r = self._execute(schedule)
            if self._last_failing is None:
                self._generated += 1
            if r.failing(self.gate):
                self._last_failing = r
                self.phase = Phase.SHRINK
                raise Violation(", ".join(r.failing(self.gate)))

        if self.seed is not None:
            # Hazard: Hypothesis's @seed also switches the example database off -- a seeded search
            # neither reads nor saves examples. Shards that share a database must run unseeded.
            test = hypothesis_seed(self.seed * self.shards + self.index)(test)
        try:
            test()
        except Violation:
            pass
        except Flaky:
            self.out.flaky = True

    def _drawn_statements(self) -> tuple[tuple[str, bool], ...]:
        """The statement points the strategies may draw (any supervisor fault may strike there)."""
        if not any(f.kind == "supervisor" for f in self.faults):
            return ()
        return tuple(smallscope.ranked(self.statements))

    def _rest(self) -> None:
        """Hypothesis stops generating at the first failure; the rest of the example budget still
        runs, so that every property is judged on as many schedules as the user asked for."""
        self.phase = Phase.REST
        rest = sample_schedules(faults=self.faults, design=self.design, tenant_mode=self.tenant_mode,
                                count=self.share - self._generated, seed=self.seed,
                                time_scale=self.time_scale, workers=self.workers, points=self.points,
                                workload=self.workload)
        self.progress(f"exploring the other {len(rest)} examples of the budget")
        self._execute_all([("", self._configured(s)) for s in rest])

    def _replay(self, ce: Run) -> None:
        """Run the counterexample :attr:`replays` times more, uncached; count the runs that fail the gate
        on one of the properties it failed (``out.reproduced``); fewer than all is "flaky"."""
        self.phase = Phase.REPLAY
        wanted = set(ce.failing(self.gate))
        for k in range(self.replays):
            self.progress("replaying the counterexample once more" if self.replays == 1
                          else f"replaying the counterexample: {k + 1} of {self.replays}")
            history = self._run(ce.schedule, design=self.handle)
            again = Run(ce.schedule, check(history), history, 0.0)
            self.out.replays.append(again)
            self.out.runs.append(again)
            self.out.reproduced += bool(wanted & set(again.failing(self.gate)))
        self.out.replayed = self.out.replays[0]
        self.out.flaky = self.out.reproduced < self.replays

    def _exit_reason(self) -> ExitReason:
        if self.out.counterexample is not None:
            return ExitReason.SHRINK_BUDGET if self.out.shrink_budget_spent else ExitReason.SHRUNK
        return ExitReason.BUDGET if self.out.budget_spent else ExitReason.EXAMPLES


def search(run: RunOne, **kwargs) -> SearchOutcome:
    """Search for a schedule that violates a property. *run* executes one schedule with the design's
    handle (:class:`RunOne`: ``Runner.run``).

    First the small-scope pass (:mod:`harness.engine.smallscope`, outside the example budget), then
    *examples* random schedules from Hypothesis, shrinking the first violation it finds (with a
    *seed*, reproducibly -- and then, as Hypothesis does, without its example database). *budget*
    (seconds) stops both passes from starting new schedules once spent; shrinking and the final
    replay still run. *database* is Hypothesis's example database (default: a directory under
    :data:`CACHE_DIR`); *shard* ``(i, n)`` runs the i-th of n disjoint parts.
    *run_many* (with *parallel* > 1, see :mod:`harness.slots`) runs the schedules known in advance --
    the small-scope pass and the examples after the first failure -- *parallel* at a time.
    *design* is the design's handle: its options (``--design-option``) go into every schedule.
    *gate* (:func:`properties.gate`, default every property): the properties whose violation is a
    failure: only such a run is shrunk, kept in the example database and made the counterexample.
    *stop_at_first*: no new schedule starts once a run fails the gate (the rest of the small-scope
    pass, Hypothesis's generation, the rest of the budget); that run is shrunk and replayed as always.
    A hunt for one property (``gate=(name,)``) then ends at its first violation.
    *replays*: how many times the counterexample is run again at the end (``out.reproduced`` of them
    failed again; ``out.flaky`` when not all did).
    """
    return Search(run, **kwargs).run()


def sample_schedules(*, faults, design: str, tenant_mode: str, count: int, seed: int | None,
                     time_scale: float, points: tuple[str, ...],
                     workers: int | None = None, workload: str | None = None) -> list[Schedule]:
    """*count* schedules drawn from the strategy without running anything, their faults at *points*."""
    drawn: list[Schedule] = []

    @settings(max_examples=count, deadline=None, database=None, phases=[HypothesisPhase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @given(schedules(faults=faults, design=design, tenant_mode=tenant_mode, time_scale=time_scale,
                     workers=workers, points=points, workload=workload))
    def draw(schedule):
        drawn.append(schedule)

    hypothesis_seed(seed if seed is not None else 0)(draw)()
    seen = set()
    unique = []
    for s in drawn:
        if s.to_json() not in seen:
            seen.add(s.to_json())
            unique.append(s)
    return unique
