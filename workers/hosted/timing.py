"""A hosted library's intervals, derived from a schedule in the ratios of the library's documented defaults.

An adapter declares its library's intervals as data (:class:`Interval`): the documented default in
seconds, the schedule knob it scales from (its *anchor*, a :class:`~core.schedule.Timing` field in
article seconds), and what the library can set (any float, whole seconds, a cron's period, or nothing
at all: a fixed constant). :class:`Intervals` names, per knob, the library interval that knob *is*
(``{"lease": "stalled threshold"}``: the schedule's lease is procrastinate's 30 s stalled threshold);
every other interval keeps its documented ratio to that one. Where the library cannot (a fixed
second, a cron's whole seconds), :meth:`Intervals.broken` says which ratio broke and by how much, and
:meth:`Intervals.min_time_scale` is the scale below which a break passes the interval's ``bound``.
A *recovery* interval (how often the library's recovery acts) stretches the run's stall and deadline
limits by its length (:meth:`Intervals.stall_extra`), so that a run does not end before it could act.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ...core.schedule import JobSpec, Schedule, Timing

FLOAT = "float"
WHOLE = "whole"
CRON = "cron"
FIXED = "fixed"
GRIDS = (FLOAT, WHOLE, CRON, FIXED)
# how a broken ratio is worded
PERIOD = "period"  # too frequent / rare
WAIT = "wait"  # too short / long
TOLERANCE = 0.05  # a ratio within 5% of the documented one is kept (a rounding of a float, not a change)

_DIVISORS_60 = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)
# The periods a cron repeats evenly: */n seconds or */n minutes with n dividing 60, */n hours with n
# dividing 24, and once a day. (*/7 seconds fires at :00, :07, ... :56, then :00 again: 4 s, not 7.)
CRON_PERIODS = (*_DIVISORS_60, *(60 * n for n in _DIVISORS_60), *(3600 * n for n in (1, 2, 3, 4, 6, 8, 12)),
                86400)


@dataclass(frozen=True)
class Interval:
    """One interval of a hosted library."""

    name: str  # as the notes and the docs call it: "recovery period"
    default: float  # the library's documented default, seconds
    anchor: str = "lease"  # the schedule knob it scales from (a Timing field; heartbeat is derived)
    grid: str = FLOAT  # what the library can set: FLOAT, WHOLE seconds, a CRON period, or FIXED
    kind: str = PERIOD  # PERIOD (how often) or WAIT (how long): the words of a broken ratio
    recovery: bool = False  # how often the library's recovery acts: the run's limits stretch by it
    # The factor by which its ratio may come out longer than documented before the library behaves
    # differently (the adapter says why); a clamp past it raises min_time_scale. None: reported only.
    bound: float | None = 1.0
    setting: str = ""  # the library's own name for it (a parameter, a constant, a cron)
    # Real seconds the adapter sets no less than, whatever the scale (0: none): a poll that, scaled,
    # would load the machine. The ratio it breaks is reported (broken), never raising the time scale.
    least: float = 0.0

    def __post_init__(self):
        if self.grid not in GRIDS or self.kind not in (PERIOD, WAIT) or self.default <= 0:
            raise ValueError(f"interval {self.name!r}: grid in {GRIDS}, kind period or wait, default > 0")


@dataclass(frozen=True)
class Broken:
    """A documented ratio a run cannot keep."""

    library: str
    interval: str
    per: str  # the interval (or the schedule knob) it is a ratio to
    ratio: float  # ours
    documented: float
    grid: str  # Interval.grid
    bound: float | None  # Interval.bound
    # The time scale the bound sets, when this run is below it (the library cannot set less); None:
    # a rounding to the library's grid above it, or a fixed interval reported only.
    min_time_scale: float | None

    @property
    def factor(self) -> float:
        return self.ratio / self.documented

    def message(self, kind: str = PERIOD) -> str:
        f = self.factor
        words = ("too frequent", "too rare") if kind == PERIOD else ("too short", "too long")
        how = f"{_num(1 / f)}× {words[0]}" if f < 1 else f"{_num(f)}× {words[1]}"
        at_most = f", {self.bound:g}× at most" if self.bound not in (None, 1) else ""
        if self.min_time_scale is not None:
            least = "fixed in the library" if self.grid == FIXED else "the library sets no less than 1 s"
            why = f"; {least}{at_most}: time scale {self.min_time_scale:g} or more"
        elif self.grid in (WHOLE, CRON):
            why = "; " + ("whole seconds" if self.grid == WHOLE
                          else "the nearest period a cron repeats evenly")
        else:
            within = f", within its {self.bound:g}× bound" if self.bound is not None else ""
            why = f"; fixed in the library{within}" if self.grid == FIXED else ""
        return (f"{self.library}: {self.interval} / {self.per} is {_num(self.ratio)}, documented "
                f"{_num(self.documented)} ({how}{why})")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "factor": self.factor}


def _num(x: float) -> str:
    return f"{x:.0f}" if x >= 1000 else f"{x:.3g}"


def on_grid(grid: str, seconds: float, default: float) -> float:
    """The value closest to *seconds* the library can set on *grid* (a FIXED interval: its default)."""
    if grid == FIXED:
        return default
    if grid == WHOLE:
        return float(max(1, round(seconds)))
    if grid == CRON:
        return float(min(CRON_PERIODS, key=lambda p: abs(math.log(p / seconds))))
    return seconds


def cron(period: float) -> str:
    """A cron expression repeating every *period* seconds (one of :data:`CRON_PERIODS`); a sixth field,
    as croniter reads it, is the seconds."""
    p = int(period)
    if p not in CRON_PERIODS:
        raise ValueError(f"no cron repeats evenly every {period:g} s; see CRON_PERIODS")
    if p < 60:
        return f"* * * * * */{p}"
    if p < 3600:
        return f"*/{p // 60} * * * *"
    return "0 0 * * *" if p == 86400 else f"0 */{p // 3600} * * *"


def _article(schedule: Schedule, knob: str) -> float:
    """*knob* of *schedule* in article seconds (a Timing field, or the value Schedule derives for it)."""
    value = getattr(schedule.timing, knob)
    return value if value is not None else getattr(schedule, knob)


@dataclass(frozen=True)
class Intervals:
    """A library's intervals; ``anchors``: {schedule knob: the interval that knob is}."""

    library: str
    intervals: tuple[Interval, ...]
    anchors: dict[str, str] = field(hash=False)

    def __post_init__(self):
        names = [i.name for i in self.intervals]
        for knob, name in self.anchors.items():
            if name not in names or self[name].anchor != knob:
                raise ValueError(f"{self.library}: anchor {knob} names no interval of its own ({name!r})")
        for i in self.intervals:
            if i.anchor not in self.anchors:
                raise ValueError(f"{self.library}: interval {i.name!r} scales from {i.anchor}, not an anchor")

    def __getitem__(self, name: str) -> Interval:
        return next(i for i in self.intervals if i.name == name)

    def without(self, *names: str) -> Intervals:
        """These intervals but *names* (an interval an option turns off)."""
        return dataclasses.replace(self, intervals=tuple(i for i in self.intervals if i.name not in names))

    def _reference(self, i: Interval) -> Interval:
        return self[self.anchors[i.anchor]]

    def ideal(self, schedule, i: Interval) -> float:
        """Real seconds of *i* that keep its documented ratio for *schedule*: its anchor's knob for the
        anchor itself, else its default times the anchor's (on its grid) over the anchor's default."""
        ref = self._reference(i)
        knob = schedule.seconds(_article(schedule, i.anchor))
        return knob if i is ref else i.default * on_grid(ref.grid, knob, ref.default) / ref.default

    def values(self, schedule) -> dict[str, float]:
        """``{interval: real seconds}`` for *schedule*: each on its grid."""
        return {i.name: max(i.least, on_grid(i.grid, self.ideal(schedule, i), i.default))
                for i in self.intervals}

    def broken(self, schedule) -> list[Broken]:
        """The documented ratios *schedule* cannot keep (more than :data:`TOLERANCE` off)."""
        v = self.values(schedule)
        out = []
        for i in self.intervals:
            ref = self._reference(i)
            if i is ref:
                knob = schedule.seconds(_article(schedule, i.anchor))
                ours = v[i.name] / knob
                documented = 1.0
                per = i.anchor
            else:
                ours = v[i.name] / v[ref.name]
                documented = i.default / ref.default
                per = ref.name
            if abs(math.log(ours / documented)) > math.log1p(TOLERANCE):
                floor = self._floor(i, schedule)
                below = floor if floor is not None and schedule.time_scale < floor * (1 - 1e-9) else None
                out.append(Broken(self.library, i.name, per, ours, documented, i.grid, i.bound, below))
        return out

    def notes(self, schedule) -> list[str]:
        return [b.message(self[b.interval].kind) for b in self.broken(schedule)]

    def stall_extra(self, schedule) -> float:
        """Article seconds the run's stall and deadline limits stretch by: the longest recovery period."""
        v = self.values(schedule)
        return max((v[i.name] for i in self.intervals if i.recovery), default=0.0) / schedule.time_scale

    def _floor(self, i: Interval, schedule: Schedule) -> float | None:
        """The time scale below which *i* breaks its ratio by more than its bound, the library setting
        no less (None: no such scale). A float anchor assumed; a whole or cron interval's least is 1 s."""
        if i.grid == FLOAT or i.bound is None:
            return None
        least = i.default if i.grid == FIXED else 1.0
        return least * self._reference(i).default / (i.bound * i.default * _article(schedule, i.anchor))

    def min_time_scale(self, timing: Timing | None = None) -> float | None:
        """The smallest time scale at which no interval breaks its ratio past its bound (for *timing*,
        default the article's); None: every scale will do."""
        schedule = Schedule(jobs=(JobSpec(1),), timing=timing or Timing())
        floors = [f for f in (self._floor(i, schedule) for i in self.intervals) if f is not None]
        return max(floors) if floors else None
