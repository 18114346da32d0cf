"""Building a :class:`~harness.report.result.Report` from what the engine found: the same for the command
line and the pytest plugin. Saving schedules happens here (stamped with the server they ran on, so a
replay uses it), and so do the rules a verdict needs besides the properties: a search in which no fault
could strike decides nothing (held becomes unknown), an allowed fault that never struck is said.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ...core import misdeclared, overlap
from ...core.history import History
from ...core.schedule import Schedule
from ...properties import HELD, UNKNOWN, Result, violated_names
from ..engine.compare import Comparison
from ..engine.outcome import SearchOutcome
from . import text, waits
from .result import COUNTEREXAMPLE, Report, Saved

Stamp = Callable[[Schedule], Schedule]


def schedule_stem(design: str, what: str) -> str:
    """A file-name stem: a plug-in's spec (a path or module:attr) keeps only its attribute's name."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", design.rpartition(":")[2] or design).strip("-.") or "design"
    return f"{name}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', what).strip('-')}"


def save(schedule: Schedule, out_dir: Path, stem: str) -> Path:
    """Write *schedule* under *out_dir* as ``STEM-YYYYmmdd-HHMMSS-NNNNNN.json`` (never overwriting)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{time.monotonic_ns() // 1000 % 10**6:06d}.json"
    path.write_text(schedule.to_json() + "\n")
    return path


def no_strike(results: dict) -> dict:
    """What held in a search where no fault could strike is unknown: nothing was put to the test."""
    return {n: r if r.status != HELD else Result(
        n, UNKNOWN, evidence="no fault could strike: no execution reached a strike point")
        for n, r in results.items()}


def header(design: str, tenant_mode: str, options: dict | None, histories) -> str:
    """``DESIGN [K=V ...] (TENANT)`` for a title: the design with its ``--design-option`` values (a
    design's own tenant scope among them: ``scope=session``), and what set each job's tenant -- the
    tenant mode, or ``own tenant code`` when the design's worker ran the body on its own connection
    (``run_job(conn=...)``, ``Execution.own_tenant``): the tenant mode then played no part."""
    opts = "".join(f" {k}={v}" for k, v in sorted((options or {}).items()))
    own = any(ex.own_tenant for h in histories for ex in h.executions())
    return f"{design}{opts} ({'own tenant code' if own else tenant_mode})"


def shown(out: SearchOutcome, stem: str, stamp: Stamp, out_dir: Path) -> list[Saved]:
    """Every violated property's own run (``SearchOutcome.shown``) saved under *out_dir*, stamped: one
    file per distinct run, the counterexample's first (named ``STEM-...``, the others ``STEM-PROPERTY-...``
    after the first property each shows), each naming the properties it is shown for and how it was
    reached."""
    runs: dict[int, tuple] = {}  # id(run) -> (run, its properties, how)
    for name, shown_run in out.shown.items():
        run, names, how = runs.setdefault(id(shown_run.run), (shown_run.run, [], shown_run.how))
        names.append(name)
    ordered = sorted(runs.values(), key=lambda x: x[0] is not out.counterexample)  # stable: table order
    saved = []
    for run, names, how in ordered:
        first = run is out.counterexample
        s = stamp(run.schedule)
        file = save(s, out_dir, stem if first else f"{stem}-{names[0]}")
        saved.append(Saved(COUNTEREXAMPLE if first else f"schedule violating {', '.join(names)}", s, file,
                           run.violated, run.history, shown_for=tuple(names), how=how, results=run.results))
    return saved


def search_report(out: SearchOutcome, *, faults, design: str, tenant_mode: str, examples: int,
                  seed: int | None, server: dict, stamp: Stamp, out_dir: Path, strict: bool = False,
                  gate: tuple[str, ...] | None = None) -> Report:
    """A search's report; every violated property's own schedule saved under *out_dir*, stamped
    (:func:`shown`), its row naming the file and the replay command (in the text, the JSON and HTML)."""
    names = ",".join(f.name for f in faults) or "none"
    results = out.aggregate()
    blocked = out.no_strike_point(faults)
    if blocked:
        results = no_strike(results)
    coverage = out.coverage()
    never = out.never_struck(faults, coverage)
    options = out.runs[0].schedule.design_options if out.runs else {}
    title = (f"{header(design, tenant_mode, options, (r.history for r in out.runs))} under faults {names}: "
             f"{len(out.runs)} runs "
             f"({out.small_scope_runs} small-scope) in {out.seconds:.1f} s")
    saved = shown(out, schedule_stem(design, names.replace(",", "-")), stamp, out_dir)
    report = Report("search", title, {design: results}, saved=saved, strict=strict, runs=len(out.runs),
                    coverage=coverage, retry_spacing=out.retry_spacing(), never_struck=never,
                    bodies=overlap.summary(r.history for r in out.runs),
                    no_strike=blocked, budget_spent=out.budget_spent,
                    shrink_budget_spent=out.shrink_budget_spent, flaky=out.flaky,
                    replays=len(out.replays), reproduced=out.reproduced,
                    exit_reason=out.exit_reason.name.lower() if out.exit_reason else None,
                    notes=text.notes_for(results), gate=gate)
    ce_json = None
    if report.counterexample is not None:
        ce_json = {"schedule": saved[0].schedule.to_dict(), "file": str(saved[0].file),
                   "replay": saved[0].replay, "violated": saved[0].violated, "flaky": out.flaky,
                   "replays": len(out.replays), "reproduced": out.reproduced,
                   "shown_for": list(saved[0].shown_for), "shrink": saved[0].how}
    report.data = {"design": design, "tenant_mode": tenant_mode, "faults": [f.name for f in faults],
                   "examples": examples, "seed": seed, "server": server,
                   "properties": text.results_json(results, report),
                   "counterexample": ce_json, "shrink_runs": out.shrink_runs,
                   "small_scope_runs": out.small_scope_runs, "coverage": coverage,
                   "retry_spacing": report.retry_spacing, "bodies_at_once": report.bodies,
                   "never_struck": never, "budget_spent": out.budget_spent, "exit_reason": report.exit_reason,
                   "no_fault_could_strike": blocked, "runs": len(out.runs), "seconds": round(out.seconds, 3),
                   "first_failure": None if out.first_failure_seconds is None else
                   {"seconds": round(out.first_failure_seconds, 3), "runs": out.first_failure_runs}}
    _waits(report, [r.history for r in out.runs], out.counterexample.history if out.counterexample else None)
    _misdeclared(report, [r.history for r in out.runs])
    return report


def _misdeclared(report: Report, histories, design: str = "") -> None:
    """What the design declared wrong, as its runs show it (:mod:`core.misdeclared`): a ``WARNING`` line
    each after the table (*design*'s name before it, in a compare) and the JSON's ``design_warnings``;
    the properties' verdicts stay as they are."""
    lines = misdeclared.warnings(histories)
    report.notes += [f"{design}: {line}" if design else line for line in lines]
    if design:
        report.data["designs"][design]["design_warnings"] = lines
    else:
        report.data["design_warnings"] = lines


def _waits(report: Report, histories, first: History | None, label: str = "the counterexample's run") -> None:
    """Per-tenant waits of one run with more than one tenant (:mod:`.waits`): the JSON's ``waits`` (None:
    no such run) and their lines after the property table."""
    chosen = waits.pick(histories, first, label)
    report.data["waits"] = None if chosen is None else waits.section(*chosen)
    report.notes += waits.lines(report.data["waits"])


def replay_report(history: History, results: dict, schedule: Schedule, file: str | Path, *,
                  strict: bool = False, notes: Sequence[str] = (),
                  gate: tuple[str, ...] | None = None) -> Report:
    """A replay's report: the file it ran is its one saved schedule."""
    what = header(schedule.design, schedule.tenant_mode, schedule.design_options, [history])
    title = f"replay of {file} on {what}"
    saved = [Saved("this replay", schedule, Path(file), violated_names(results),
                   history, results=results)]  # its own results: the events its evidence names, marked
    report = Report("replay", title, {schedule.design: results}, saved=saved, strict=strict, history=history,
                    notes=[*notes, *text.notes_for(results)], gate=gate,
                    bodies=overlap.bodies_at_once(history).to_dict())
    report.data = {"design": schedule.design, "tenant_mode": schedule.tenant_mode,
                   "faults": schedule.faults(), "replay": str(file), "server": history.server,
                   "properties": text.results_json(results), "bodies_at_once": report.bodies}
    _waits(report, [history], history, "this replay's run")
    _misdeclared(report, [history])
    return report


def compare_report(c: Comparison, *, faults, tenant_mode: str, stamp: Stamp, out_dir: Path,
                   strict: bool = False, gate: tuple[str, ...] | None = None) -> Report:
    """A compare's report: every deciding schedule saved as ``compare-S<i>-...json``."""
    saved = []
    for i, deciding in enumerate(c.schedules, 1):
        s = stamp(deciding.schedule)
        saved.append(Saved(f"S{i}: {deciding.origin}", s, save(s, out_dir, f"compare-S{i}"),
                           deciding.run.violated, deciding.run.history))
    names = ",".join(f.name for f in faults) or "none"
    report = Report("compare", f"compare: faults {names} ({tenant_mode})", dict(c.results), saved=saved,
                    strict=strict, decided_by=c.decided_by,
                    runs=sum(len(o.runs) for o in c.outcomes.values()), gate=gate)
    report.data = {"faults": [f.name for f in faults], "tenant_mode": tenant_mode,
                   "schedules": [d.schedule.to_dict() for d in c.schedules],
                   "origins": [d.origin for d in c.schedules], "files": [str(s.file) for s in saved],
                   "designs": {d: {"properties": text.results_json(r),
                                   "decided_by": {n: i + 1 for n, i in c.decided_by[d].items()},
                                   "bodies_at_once": overlap.summary(
                                       x.history for x in (c.outcomes[d].runs if d in c.outcomes else ()))}
                               for d, r in c.results.items()}}
    for d in c.results:
        _misdeclared(report, [x.history for x in (c.outcomes[d].runs if d in c.outcomes else ())], d)
    return report
