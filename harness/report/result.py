"""One result object for a search, a replay or a compare: what the command line prints and the pytest
plugin asserts on, built once (:mod:`harness.report.build`) and rendered by :mod:`harness.report.text`,
:mod:`~harness.report.files` (JSON: :meth:`Report.to_json`, JUnit, HTML).

The rules that decide whether a run fails live here and only here: a violated property; with
*strict*, a property that could not decide or an allowed fault that struck in no run; and always a
search in which no fault could strike at all (nothing was put to the test). With a gate
(``--fail-on``/``--allow``, :func:`properties.gate`) only the gated properties fail it; the others are
still judged and shown, as allowed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import EXIT_HELD, EXIT_VIOLATED
from ...core.history import History
from ...core.schedule import Schedule
from ...properties import PROPERTIES, not_judged_names, undecided_names, violated_names

COUNTEREXAMPLE = "counterexample"  # the name of a search's saved counterexample (Saved.name)
PROGRAM = "pg-job-chaos"  # the console script; run.py and python -m pg_job_chaos are the same program


def replay_command(file: str | Path) -> str:
    """The command that runs a saved schedule again: spelled here, and nowhere else."""
    return f"{PROGRAM} replay {shlex.quote(str(file))}"


@dataclass
class Saved:
    """A schedule shown to the user with its run: a search's run for one or more violated properties
    (the first is the counterexample), a compare's deciding schedule, or the file a replay ran."""

    name: str  # "counterexample", "schedule violating no-overlap", "S2: lease's counterexample ..."
    schedule: Schedule  # stamped (server version, pooler, library versions): a replay uses them
    file: Path
    violated: list[str]
    history: History | None = None
    # a search's: the violated properties whose row names this schedule (its evidence is this run's)
    shown_for: tuple[str, ...] = ()
    how: str = ""  # how it was reached: "shrunk", "shrink budget spent" or "as found" (engine/outcome.py)
    results: dict | None = None  # this run's own results: the events the evidence names (Result.event)

    @property
    def replay(self) -> str:
        return replay_command(self.file)


@dataclass
class Report:
    """The verdicts of one command. ``suites`` maps a design to its properties' :class:`Result`
    (one suite for a search or a replay, one per design for a compare)."""

    kind: str  # "search" | "replay" | "compare"
    title: str
    suites: dict[str, dict]
    # the command's own JSON fields (see to_json), properties included
    data: dict = field(default_factory=dict)
    saved: list[Saved] = field(default_factory=list)  # saved[0] is the counterexample, when there is one
    strict: bool = False
    runs: int = 1
    coverage: dict = field(default_factory=dict)
    retry_spacing: dict = field(default_factory=dict)  # SearchOutcome.retry_spacing: a figure, not a verdict
    bodies: dict = field(default_factory=dict)  # job bodies at once (core.overlap): a figure, not a verdict
    never_struck: list[str] = field(default_factory=list)  # allowed faults that struck in no run
    no_strike: bool = False  # faults were allowed and no execution reached a single strike point
    budget_spent: bool = False
    shrink_budget_spent: bool = False
    flaky: bool = False
    replays: int = 0  # how many times a search ran its counterexample again (0: none, or not a search)
    reproduced: int = 0  # how many of those replays failed again
    exit_reason: str | None = None
    notes: list[str] = field(default_factory=list)  # sentences printed after the table
    decided_by: dict[str, dict[str, int]] | None = None  # compare: design -> property -> schedule index
    history: History | None = None  # the run a replay made
    gate: tuple[str, ...] | None = None  # the properties whose violation fails the run (None: every one)

    @property
    def results(self) -> dict:
        """The one suite of a search or a replay."""
        if len(self.suites) != 1:
            raise ValueError(f"a {self.kind} report has {len(self.suites)} suites; read .suites")
        return next(iter(self.suites.values()))

    @property
    def counterexample(self) -> Saved | None:
        """A search's first saved schedule when it is the counterexample (a gated violation's: with only
        allowed violations there is none, and their schedules are saved as found)."""
        first = self.saved[0] if self.kind == "search" and self.saved else None
        return first if first is not None and first.name == COUNTEREXAMPLE else None

    def schedule_for(self, name: str) -> Saved | None:
        """The saved schedule a search's row of *name* names (None: not violated, or not a search)."""
        return next((s for s in self.saved if name in s.shown_for), None)

    def references(self) -> dict[str, int]:
        """Property -> the number (from 1) of the saved schedule its row names: the text's ``[k]``."""
        return {n: k for k, s in enumerate(self.saved, 1) for n in s.shown_for}

    def violated(self, suite: str | None = None) -> list[str]:
        """Violated properties of *suite* (default: of every suite, each name once)."""
        names: list[str] = []
        for name, results in self.suites.items():
            if suite is None or name == suite:
                names += [n for n in violated_names(results) if n not in names]
        return names

    def undecided(self) -> list[str]:
        """Gated properties that could not decide (``--strict`` fails on them)."""
        names: list[str] = []
        for results in self.suites.values():
            names += [n for n in undecided_names(results) if n not in names and self.gates(n)]
        return names

    def not_judged(self) -> list[str]:
        """Gated properties not judged for the design, and undecided in no suite: ``--strict`` passes
        over them (``Result.judged``)."""
        undecided = self.undecided()
        names: list[str] = []
        for results in self.suites.values():
            names += [n for n in not_judged_names(results)
                      if n not in names and n not in undecided and self.gates(n)]
        return names

    def gates(self, name: str) -> bool:
        """True when a violation of *name* fails the run (``--fail-on``/``--allow``)."""
        return self.gate is None or name in self.gate

    def failing(self) -> list[str]:
        """The violated properties that fail the run."""
        return [n for n in self.violated() if self.gates(n)]

    def allowed(self) -> list[str]:
        """The violated properties the gate lets pass: reported, not failing."""
        return [n for n in self.violated() if not self.gates(n)]

    def warnings(self) -> list[str]:
        """What a user must not miss without the run failing for it (with ``strict``: see
        :meth:`failures`)."""
        out = [f"WARNING: fault {f} struck in no run of this search: nothing was tested against it"
               for f in self.never_struck]
        if self.budget_spent:
            out.append("--budget ran out before the example budget: fewer schedules ran than asked for")
        if self.strict and self.not_judged():
            out.append(f"--strict passes over what is not judged for this design (unknown, never held): "
                       f"{', '.join(self.not_judged())}")
        return out

    def to_json(self) -> dict:
        """The JSON document (``--json``): the command's fields, then what fails the run."""
        return {**self.data, "fail_on": list(self.gate) if self.gate is not None else list(PROPERTIES),
                "allowed_violations": self.allowed(), "failing": self.failing(), "failed": self.failed}

    def failures(self) -> list[str]:
        """Why the run fails besides a violated property: one sentence each (empty: it does not)."""
        out = []
        if self.no_strike:
            out.append(f"NO FAULT COULD STRIKE: no execution of {', '.join(self.suites)} reached a strike "
                       f"point in {self.runs} runs (does its worker run the harness's job body? see "
                       "workers/hosted/protocol.py); "
                       "the run fails")
        if self.strict and self.undecided():
            out.append(f"--strict: {', '.join(self.undecided())} could not decide; the run fails")
        if self.strict and self.never_struck:
            out.append(f"--strict: {', '.join(self.never_struck)} struck in no run; the run fails")
        return out

    @property
    def failed(self) -> bool:
        return bool(self.failing()) or bool(self.failures())

    def exit_code(self) -> int:
        """0 every property held; 1 a property violated, or the run failed for a reason of
        :meth:`failures`."""
        return EXIT_VIOLATED if self.failed else EXIT_HELD
