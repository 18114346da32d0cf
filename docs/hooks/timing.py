"""MkDocs hook: the hosted libraries' timing tables, generated from each adapter's ``TIMING``.

A page writes ``<!-- timing: NAME -->`` (a design of ``pg_job_chaos.workers.LIBRARIES``) where that
library's tables go -- its intervals, then their real seconds at a few time scales -- and
``<!-- timing: all -->`` where the table of every hosted queue goes. The adapters import their
libraries: the site builds where the libraries extra is installed, as ``.ci/run`` builds it.
"""

from __future__ import annotations

import importlib
import re
from fractions import Fraction

MARK = re.compile(r"<!-- timing: ([\w-]+) -->")
KNOBS = {"lease": "L", "poll": "P"}  # how the tables write the schedule's knobs
SEARCH = 0.5  # harness/scales.py SEARCH: the search's default time scale
SCALES = (SEARCH, 1.0, 10.0)


def on_page_markdown(markdown: str, page, config, files, **_) -> str:
    try:
        return MARK.sub(lambda m: summary() if m.group(1) == "all" else library(m.group(1)), markdown)
    except ImportError as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_path}: the timing tables import the adapters, and {exc.name} "
                          "is not installed: pip install -e '.[libraries]'") from exc


def design_class(name: str):
    from pg_job_chaos.workers import LIBRARIES

    module, _, attr = LIBRARIES[name].rpartition(":")
    return getattr(importlib.import_module(module), attr)


def _num(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:.0f}"


def _s(seconds: float) -> str:
    return f"{_num(seconds)} s"


def _ratio(r: float, knob: str) -> str:
    """*r* times the knob's letter: ``L``, ``20 L``, ``L / 3``, ``2 L / 3``."""
    f = Fraction(r).limit_denominator(1000)
    if abs(float(f) - r) > 1e-9 * r:
        return f"{r:.3g} {knob}"
    n, d = f.numerator, f.denominator
    return (f"{n} {knob}" if n != 1 else knob) + (f" / {d}" if d != 1 else "")


def ours(timing, i) -> str:
    """What the adapter sets *i* to, in terms of the schedule's knob."""
    from pg_job_chaos.workers.hosted.timing import CRON, FIXED, WHOLE

    ref, knob = timing[timing.anchors[i.anchor]], KNOBS.get(i.anchor, i.anchor)
    if i.grid == FIXED:
        return f"{_s(i.default)}, fixed"
    if ref.grid == FIXED:
        return f"{_s(i.default)} (its anchor is fixed)"
    said = _ratio(i.default / ref.default, knob)
    return said + {WHOLE: ", whole seconds", CRON: ", a cron's even period"}.get(i.grid, "")


def notes(timing, i) -> str:
    out = []
    if timing.anchors.get(i.anchor) == i.name:
        out.append(f"the anchor: the schedule's {i.anchor}")
    if i.recovery:
        out.append("recovery: the run's limits stretch by it")
    if i.bound is None:
        out.append("reported, never raising the time scale")
    elif i.bound != 1:
        out.append(f"{i.bound:g}× its ratio at most")
    return "; ".join(out)


def _cell(timing, schedule, i, value: float) -> str:
    from pg_job_chaos.workers.hosted.timing import CRON, PERIOD, cron

    text = _num(value) + (f" (`{cron(value)}`)" if i.grid == CRON else "")
    broken = next((b for b in timing.broken(schedule) if b.interval == i.name), None)
    if broken is None:
        return text
    f = broken.factor
    words = ("too frequent", "too rare") if i.kind == PERIOD else ("too short", "too long")
    return text + (f" ({_num(1 / f)}× {words[0]})" if f < 1 else f" ({_num(f)}× {words[1]})")


def library(name: str) -> str:
    """The tables of one library: its intervals, and their real seconds at a few time scales."""
    from pg_job_chaos.core.schedule import JobSpec, Schedule

    cls = design_class(name)
    timing, least = cls.TIMING, cls.min_time_scale
    rows = ["| interval | the library's setting | documented | ours | notes |", "|---|---|---|---|---|"]
    rows += [f"| {i.name} | `{i.setting}` | {_s(i.default)} | {ours(timing, i)} | {notes(timing, i)} |"
             for i in timing.intervals]
    scales = sorted({*SCALES, *([least] if least else [])})
    heads = [f"{x:g}" + (" (the least)" if x == least else " (below the least)" if least and x < least
                         else " (search's default)" if x == SEARCH else "") for x in scales]
    schedules = [Schedule(jobs=(JobSpec(1),), time_scale=x) for x in scales]
    values = [timing.values(s) for s in schedules]
    real = [f"| interval | documented | {' | '.join(f'time scale {h}' for h in heads)} |",
            "|---|---|" + "---|" * len(scales)]
    for i in timing.intervals:
        cells = [_cell(timing, s, i, v[i.name]) for s, v in zip(schedules, values, strict=True)]
        real.append(f"| {i.name} | {_num(i.default)} | {' | '.join(cells)} |")
    real.append("| stall / deadline stretched by (article s) | — | "
                + " | ".join(_num(timing.stall_extra(s)) for s in schedules) + " |")
    said = "Real seconds (the article's lease is 1 s times the time scale):"
    return "\n".join(rows) + f"\n\n{said}\n\n" + "\n".join(real)


def summary() -> str:
    """One row per hosted queue: what the schedule's knobs are, its least scale, what is only reported."""
    from pg_job_chaos.workers import LIBRARIES

    rows = ["| design | the schedule's knob is… | least time scale | reported, never scaled |",
            "|---|---|---|---|"]
    for name in LIBRARIES:
        if name == "contract":
            continue
        cls = design_class(name)
        timing = cls.TIMING
        anchors = ", ".join(f"{knob} = {i} ({_s(timing[i].default)})" for knob, i in timing.anchors.items())
        reported = ", ".join(i.name for i in timing.intervals if i.bound is None) or "—"
        least = f"{cls.min_time_scale:g}" if cls.min_time_scale else "none"
        rows.append(f"| `{name}` | {anchors} | {least} | {reported} |")
    return "\n".join(rows)
