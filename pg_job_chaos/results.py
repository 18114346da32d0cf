"""What a chaos run returns to a test: the verdicts, and on a violation the evidence to act on."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .core.history import History
from .core.schedule import Schedule
from .properties import VIOLATED, undecided_names, violated_names

TIMELINE_LINES = 40  # lines of the counterexample's timeline a failure message shows at most


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


class ChaosViolation(AssertionError):
    """A property the test asserted did not hold; the message is the evidence, the saved schedule
    and the command that replays it (as Hypothesis prints a failing example)."""


@dataclass
class ChaosResult:
    """The verdict of one run or one search.

    ``properties`` maps every property to its :class:`Result` (aggregated worst-first over
    a search's runs). On a violation ``schedule`` is the (shrunk) counterexample, ``file`` where it
    was saved and ``replay`` the command that runs it again; ``history`` is that run's history.
    """

    title: str
    properties: dict
    schedule: Schedule | None = None
    file: Path | None = None
    replay: str | None = None
    history: History | None = None
    runs: int = 1
    flaky: bool = False
    notes: list[str] = field(default_factory=list)
    strict: bool = False  # assert_held's default: --chaos-strict
    page: Path | None = None  # the HTML page written for it (--chaos-html)
    # the run failed besides a property: no fault could strike
    failures: list[str] = field(default_factory=list)
    report: object | None = None  # the harness.report.result.Report it was made from
    gate: tuple[str, ...] | None = None  # the properties assert_held() checks by default (None: every one)

    @classmethod
    def from_report(cls, report, *, strict: bool = False, page: Path | None = None) -> ChaosResult:
        """The test's view of a :class:`~harness.report.result.Report`: the same verdicts, the same
        failure rules, the same saved schedule and replay command as the command line's."""
        # a search's counterexample (none when every violation was allowed); a replay's file
        ce = report.counterexample if report.kind == "search" else report.saved[0] if report.saved else None
        r = cls(report.title, report.results, runs=report.runs, flaky=report.flaky, strict=strict, page=page,
                notes=list(report.notes), failures=report.failures(), report=report, gate=report.gate)
        r.notes += [x for x in report.warnings() if x not in r.notes]
        if ce is not None:
            r.schedule = ce.schedule
            r.history = ce.history
            r.file = ce.file
            r.replay = ce.replay
        return r

    def status(self, name: str) -> str:
        return self.properties[name].status

    @property
    def violated(self) -> list[str]:
        return violated_names(self.properties)

    @property
    def unknown(self) -> list[str]:
        return undecided_names(self.properties)

    @property
    def held(self) -> bool:
        """True when no property was violated and the run did not fail otherwise (an ``unknown`` is not
        a violation; see ``strict``)."""
        return not any(n in self.violated for n in self._gated()) and not self.failures

    def _gated(self) -> tuple[str, ...]:
        return tuple(self.gate) if self.gate is not None else tuple(self.properties)

    def assert_held(self, *names: str, strict: bool | None = None) -> None:
        """Raise :class:`ChaosViolation` if any of *names* (default: every property the gate fails on:
        ``--chaos-fail-on``/``--chaos-allow``) was violated,
        or with *strict* (default: ``--chaos-strict``) could not decide. Raises KeyError for a name
        that is not a property."""
        __tracebackhide__ = True  # pytest shows the caller's line and this message, not our source
        names = names or self._gated()
        for n in names:
            self.properties[n]  # noqa: B018 -- a misspelt name must fail loudly, not pass
        strict = self.strict if strict is None else strict
        bad = [n for n in names if n in self.violated or (strict and n in self.unknown)]
        if bad or self.failures:  # a search that put nothing to the test asserts nothing
            raise ChaosViolation(self.explain(bad))

    def assert_violated(self, *names: str) -> None:
        """Raise :class:`ChaosViolation` unless every one of *names* was violated (a test that pins
        down what a design is known to lose)."""
        __tracebackhide__ = True
        missing = [n for n in names if self.properties[n].status != VIOLATED]
        if missing:
            raise ChaosViolation(f"{self.title}: expected {', '.join(missing)} to be violated; "
                                 + "; ".join(f"{n}: {self.properties[n].status} "
                                             f"({self.properties[n].evidence})" for n in missing))

    def explain(self, names: list[str] | None = None) -> str:
        """The failure message: each property's evidence, the schedule, where it was saved, how to
        replay it, and the start of that run's timeline."""
        from .harness.report import text as report

        names = names or self.violated
        state = "not held" if names else "failed" if self.failures else "all held"
        lines = [f"{self.title}: {', '.join(names) + ' ' if names else ''}{state}"]
        for n in names:
            r = self.properties[n]
            jobs = f" (jobs {report.shortlist(r.jobs)})" if r.jobs else ""
            lines.append(f"  {n}: {r.status}{jobs}: {r.evidence}")
            own = self._saved_for(n)  # a search's: the schedule this evidence comes from
            if own is not None:
                lines.append(f"    its schedule ({own.how}): {own.file}; replay with: {own.replay}")
        notes = report.notes_for({n: self.properties[n] for n in names}) + self.notes + self.failures
        lines += [f"  {x}" for x in notes]
        if self.schedule is not None:
            lines.append(f"counterexample{' (FLAKY: did not fail again on replay)' if self.flaky else ''}: "
                         f"{_count(len(self.schedule.jobs), 'job')}, "
                         f"{_count(self.schedule.workers, 'worker')}")
            lines.append(self.schedule.to_json())
            if self.file is not None:
                lines.append(f"saved to {self.file}")
            if self.replay:
                lines.append(f"replay with: {self.replay}")
            if self.page is not None:
                lines.append(f"HTML page: {self.page}")
        if self.history is not None:
            ce = getattr(self.report, "counterexample", None)  # its evidence's events, marked
            saved = getattr(self.report, "saved", None) or []
            if ce is None and getattr(self.report, "kind", None) == "replay" and saved:
                ce = saved[0]  # a replay's own run, with its own results
            tl = report.timeline(self.history, marks=report.evidence_marks(ce) if ce is not None else ()
                                 ).splitlines()
            lines += report.story_lines(ce) if ce is not None else []
            lines.append("timeline of that run:")
            lines += tl[:TIMELINE_LINES] + ([f"... {len(tl) - TIMELINE_LINES} more lines"]
                                            if len(tl) > TIMELINE_LINES else [])
        return "\n".join(lines)

    def _saved_for(self, name: str):
        """The saved schedule a search's row of *name* names (None for a replay, or when not violated)."""
        schedule_for = getattr(self.report, "schedule_for", None)
        return schedule_for(name) if schedule_for is not None else None

    def table(self) -> str:
        """The terminal property table (100 columns)."""
        from .harness.report import text as report

        return report.property_table(self.properties, title=self.title)

