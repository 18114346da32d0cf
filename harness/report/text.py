"""What a run prints: property tables, the designs-side-by-side matrix, a timeline, JSON, JUnit.

Plain text on purpose (it goes to terminals, CI logs and files alike); rich renders the tables.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ...core.events import LogEvent
from ...core.history import History
from ...properties import PROPERTIES
from ...properties.core import Mark
from ...properties.effects import RETRY_ADVICE
from . import story

SYMBOL = {"held": "held", "violated": "VIOLATED", "unknown": "unknown"}
WIDTH = 100  # columns every table fits (CI logs, a default terminal); evidence wraps inside it
LIST_SHOWN = 6  # ids a cell names before "and N more"
# Events the timeline shows by their name (and the record's error, if any)
NAMED = (LogEvent.FINISHED, LogEvent.FENCED, LogEvent.LEASE_LOST, LogEvent.ABANDONED, LogEvent.SWEPT,
         LogEvent.CLAIM_FAILED, LogEvent.WORKER_ERROR)


def _render(table: Table) -> str:
    buf = io.StringIO()
    Console(file=buf, width=WIDTH, color_system=None, force_terminal=False).print(table)
    return buf.getvalue()


def shortlist(items, shown: int = LIST_SHOWN) -> str:
    """``1, 2, 3 and 5 more``: at most *shown* items, then how many are left out."""
    items = [str(i) for i in items]
    if len(items) <= shown + 1:  # "and 1 more" would take the room of the one it hides
        return ", ".join(items)
    return ", ".join(items[:shown]) + f" and {len(items) - shown} more"


def property_table(results: dict, *, title: str, refs: dict[str, int] | None = None) -> str:
    """One row per property, :data:`WIDTH` columns wide at most: names and statuses never wrap,
    the evidence wraps, job lists end in "and N more". *refs*: property -> the number of the saved
    schedule its evidence comes from (:meth:`~harness.report.result.Report.references`), said as
    ``[schedule K]`` at the end of its evidence."""
    refs = refs or {}
    t = Table(title=title, title_justify="left", width=WIDTH)
    t.add_column("property", no_wrap=True, min_width=20)
    t.add_column("status", no_wrap=True)
    t.add_column("count", justify="right", no_wrap=True)
    t.add_column("jobs", max_width=16, overflow="fold")
    t.add_column("evidence", overflow="fold", ratio=1)
    for name, r in results.items():
        ref = f" [schedule {refs[name]}]" if name in refs else ""
        # Text, not markup: "[schedule 1]" (and any bracket in evidence) would be read as a style tag
        t.add_row(name, SYMBOL[r.status], str(r.count), shortlist(r.jobs, 3), Text(r.evidence + ref))
    return _render(t)


def matrix(per_design: dict[str, dict], *, decided_by: dict[str, dict[str, int]] | None = None) -> str:
    """properties x designs, each cell held / VIOLATED (count), and with *decided_by* the schedule
    that decided a violation (``S3``: the third of the comparison's schedules)."""
    designs = list(per_design)
    names = list(PROPERTIES)
    t = Table(title="properties x designs (each searched, every counterexample replayed on every design)",
              title_justify="left")
    t.add_column("property", no_wrap=True)
    for d in designs:  # a long design name wraps in its header; the table stays WIDTH wide
        t.add_column(d, overflow="fold")
    for n in names:
        cells = []
        for d in designs:
            r = per_design[d].get(n)
            cell = ("-" if r is None
                    else SYMBOL[r.status] + (f" ({r.count})" if r.status == "violated" else ""))
            if decided_by and n in decided_by.get(d, {}):
                cell += f" S{decided_by[d][n] + 1}"
            cells.append(cell)
        t.add_row(n, *cells)
    return _render(t)


def retry_line(spacing: dict) -> list[str]:
    """How retries were spaced, in leases from the failure to the next execution: a figure, not a
    verdict."""
    if not spacing:
        return []
    back = " (straight back)" if spacing["median"] < 0.1 else ""
    return [f"retries (a figure, not a verdict): {spacing['retries']} came back "
            f"{spacing['min']:g}-{spacing['max']:g} leases after the failure, "
            f"median {spacing['median']:g}{back}"]


def bodies_line(figure: dict) -> list[str]:
    """How many job bodies ran at once (``core.overlap``: :func:`~core.overlap.summary`'s or
    :meth:`~core.overlap.AtOnce.to_dict`'s *figure*): a figure, not a verdict (none when empty)."""
    if not figure:
        return []
    runs = figure.get("runs", 1)
    where = f"in one run of {runs}" if runs > 1 else "in the run"
    return [f"bodies at once (a figure, not a verdict): at most {figure['worker']} in one worker, "
            f"{figure['run']} {where}"]


def coverage_line(coverage: dict[str, dict[str, int]]) -> list[str]:
    """Fault coverage beside the verdicts: per fault, the points it struck at and in how many runs
    (an allowed fault that struck in no run is a :meth:`~harness.report.result.Report.warnings` line)."""
    if not coverage:
        return []
    parts = [f"{fault} " + ", ".join(f"{p} {n}" for p, n in points.items())
             for fault, points in coverage.items()]
    return ["coverage (runs each fault struck in, per point): " + "; ".join(parts)]


def notes_for(results: dict) -> list[str]:
    """Plain sentences a user must not miss."""
    r = results.get("at-most-once-effects")
    if r is not None and r.status == "violated":
        return [f"at-most-once-effects is violated: no retrying design keeps it; {RETRY_ADVICE}."]
    return []


def shown_names(saved) -> tuple[str, ...]:
    """The properties a saved schedule's run is shown for: a search's rows that name it, else (a replay,
    a compare's schedule) every property it violated."""
    return tuple(saved.shown_for) or tuple(saved.violated)


def evidence_marks(saved) -> list[tuple[str, Mark]]:
    """``(property, Result.event)`` for each property a saved schedule is shown for (:func:`shown_names`)
    whose evidence names an event of its run."""
    results = saved.results or {}
    return [(n, results[n].event) for n in shown_names(saved)
            if n in results and results[n].event is not None]


def story_lines(saved) -> list[str]:
    """The "what happened" paragraphs of a saved schedule's run (:mod:`.story`), one block each."""
    told = story.paragraphs(saved.history, saved.results, shown_names(saved))
    return ["what happened:", *(f"  {n}: {text}" for n, text in told)] if told else []


def timeline(h: History, *, limit: int = 200, marks=()) -> str:
    """Which worker ran which attempt when, where faults struck, when leases expired, how workers
    ended; *marks* ``(property, properties.core.Mark)``: the events evidence names, each a ``>>>``
    line saying which property's evidence it is."""
    t0 = h.t0
    lines: list[tuple[float, str, str]] = [(m.t, m.worker, f">>> {n}: {m.what or m.kind}") for n, m in marks]
    for r in h.records:
        ev = r.get("event")
        w = r.get("worker", "")
        what = f"job {r.get('job')} attempt {r.get('attempt')}" if "job" in r else ""
        if ev == LogEvent.STARTED:
            carries = f", carries {r['fault']}" if r.get("fault") else ""
            extra = f" (tenant {r.get('tenant')}{carries})"
            lines.append((r["t"], w, f"{what} started{extra}"))
            if r.get("lease_until"):
                lines.append((r["lease_until"], "", f"lease of {what} ({w}) expires unless extended"))
        elif ev == LogEvent.FAULT:
            lines.append((r["t"], w, f"{what}: fault {r.get('fault')} strikes at {r.get('point')}"))
        elif ev == LogEvent.EFFECT and r.get("key") is not None:
            lines.append((r["t"], w, f"{what}: {r.get('relay') or 'relay'} sends effect {r['key']}"))
        elif ev == LogEvent.EFFECT:
            lines.append((r["t"], w, f"{what}: side effect"))
        elif ev == LogEvent.ACCEPTED:
            lines.append((r["t"], w, f"{what}: the world accepted {r.get('key')}"))
        elif ev == LogEvent.DUPLICATE:
            lines.append((r["t"], w, f"{what}: the world acknowledged {r.get('key')} again, not done again"))
        elif ev == LogEvent.SESSION_CUT:
            lines.append((r["t"], w, f"{what} session cut by the server ({r.get('reason')})".strip()))
        elif ev == LogEvent.RELAY_ERROR:
            lines.append((r["t"], w, f"{what} relay failed, left to the sweep: {r.get('error')}".strip()))
        elif ev in NAMED:
            detail = f": {r['error']}" if r.get("error") else ""
            lines.append((r["t"], w, f"{what} {ev}{detail}".strip()))
        elif ev == LogEvent.FAILED:
            lines.append((r["t"], w, f"{what} failed: {r.get('error')}"))
    for i in h.injected:
        detail = f": {i['detail']}" if i.get("detail") else ""  # a deploy's steps say what they did
        said = f"supervisor: {i['fault']} (job {i['job']} attempt {i['attempt']}, {i['point']}){detail}"
        lines.append((i["t"], i["worker"], said))
    for x in h.exits:
        if not x.by_harness:
            inflight = f" during job {x.job} attempt {x.attempt}" if x.job is not None else ""
            lines.append((x.t, x.worker, f"process ended: {x.told()}{inflight}"))
    # an evidence mark goes after the event it marks (the same time)
    lines = [ln for ln in sorted(lines, key=lambda ln: (ln[0], ln[2].startswith(">>> "), ln[1], ln[2]))
             if ln[0] <= h.t1]
    out = [f"{t - t0:+8.3f}s  {w:<6} {text}" for t, w, text in lines[:limit]]
    if len(lines) > limit:
        out.append(f"... {len(lines) - limit} more events")
    out.append(f"{h.t1 - t0:+8.3f}s         run ended: {h.ended_by}")
    return "\n".join(out)


def results_json(results: dict, report=None) -> dict:
    """Each property's result; with a search's *report*, a violated one's also names the schedule its
    evidence comes from (``schedule``: the file, ``replay``: the command, ``shrink``: how it was reached)."""
    out = {n: r.to_dict() for n, r in results.items()}
    for n, d in out.items():
        s = report.schedule_for(n) if report is not None else None
        if s is not None:
            d.update(schedule=str(s.file), replay=s.replay, shrink=s.how)
            if "event" in d and s.history is not None:  # on the clock of its run: seconds since it began
                for k in ("t", "since"):  # since: where the event is a span (a wait, a transaction)
                    if k in d["event"]:
                        d["event"][k] = round(d["event"][k] - s.history.t0, 4)
    return out


def schedules_lines(report) -> list[str]:
    """The saved schedules a search's rows name, numbered as the rows' ``[schedule K]``: each with its
    file, how it was reached, the properties it shows and its replay command."""
    out = ["schedules (each violated property's row names the one its evidence comes from):"]
    for k, s in enumerate(report.saved, 1):
        how = {"as found": "as found: not gated, not shrunk"}.get(s.how, s.how)
        out.append(f"  [{k}] {', '.join(s.shown_for)}: {len(s.schedule.jobs)} jobs, {s.schedule.workers} "
                   f"workers ({how}): {s.file}\n      replay with: {s.replay}")
    return out if report.saved else []


def junit(path: str, suites: dict[str, dict], *, strict: bool = False, gate=None) -> None:
    """One test case per property (per design); a violation is a failure, unknown is skipped (with
    *strict*, as ``--strict`` fails the run: a failure too, unless the property is not judged for the
    design: ``Result.judged``). A property outside *gate* (``--allow``) never fails: its violation is a
    skipped case saying it was allowed."""
    root = ET.Element("testsuites")
    for suite_name, results in suites.items():
        cases: list[tuple[str, str | None, str, str | None]] = []  # name, kind (None: passed), message, body
        for n, r in results.items():
            gated = gate is None or n in gate
            if gated and (r.status == "violated" or strict and r.status == "unknown" and r.judged):
                cases.append((n, "failure", r.evidence, json.dumps(r.to_dict())))
            elif r.status == "violated":
                cases.append((n, "skipped", f"allowed (--fail-on/--allow): {r.evidence}", None))
            elif r.status == "unknown":
                cases.append((n, "skipped", r.evidence, None))
            else:
                cases.append((n, None, "", None))
        suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(results)),
                              failures=str(sum(c[1] == "failure" for c in cases)),
                              skipped=str(sum(c[1] == "skipped" for c in cases)))
        for n, kind, message, body in cases:
            case = ET.SubElement(suite, "testcase", classname=suite_name, name=n)
            if kind is not None:
                ET.SubElement(case, kind, message=message).text = body
    ET.ElementTree(root).write(path, encoding="unicode", xml_declaration=True)


ALLOWED = "allowed by --fail-on/--allow (reported, not failing the run): "


def replay_state(report) -> str:
    """How the counterexample's replays went: "replayed: violated again", "replayed 10 times: violated
    again in 10", or "FLAKY: ..." when not every replay failed again."""
    n = report.replays
    k = report.reproduced
    if n <= 1:
        return "FLAKY: the replay did not violate it again" if report.flaky else "replayed: violated again"
    return (f"FLAKY: replayed {n} times, violated again in {k} of {n}" if report.flaky
            else f"replayed {n} times: violated again in {k} of {n}")


def render(report) -> str:
    """What the command line prints for a :class:`~harness.report.result.Report` (its failure lines
    excepted: :meth:`~harness.report.result.Report.failures`, printed after the files are written)."""
    out: list[str] = []
    if report.kind == "compare":
        out.append(matrix(report.suites, decided_by=report.decided_by))
        if report.allowed():
            out.append(f"{ALLOWED}{', '.join(report.allowed())}")
        for s in report.saved:  # s.name is "S<i>: <origin>"
            out.append(f"{s.name}: {len(s.schedule.jobs)} jobs, {s.schedule.workers} workers, faults "
                       f"{','.join(s.schedule.faults()) or 'none'}; replay: {s.replay} --design DESIGN")
        out += report.notes  # a hosted library's broken timing ratios (harness/cli/commands.py)
        return "\n".join(out)
    refs = report.references() if report.kind == "search" else None
    out.append(property_table(report.results, title=report.title, refs=refs))
    out += report.notes
    if report.allowed():
        out.append(f"{ALLOWED}{', '.join(report.allowed())}")
    if report.kind == "replay":
        this = report.saved[0] if report.saved else None
        out += bodies_line(report.bodies) + (story_lines(this) if this else [])
        out += ["timeline:", timeline(report.history, marks=evidence_marks(this) if this else ())]
        return "\n".join(out)
    out += (coverage_line(report.coverage) + retry_line(report.retry_spacing) + bodies_line(report.bodies)
            + report.warnings())
    out += schedules_lines(report)
    ce = report.counterexample
    if ce is not None:
        state = replay_state(report)
        budget = (" (shrink budget spent: the smallest schedule observed)" if report.shrink_budget_spent
                  else "")
        out += [f"\nCounterexample{budget}: {len(ce.schedule.jobs)} jobs, {ce.schedule.workers} workers; "
                f"violates {', '.join(ce.violated)}; {state} (schedule [1]: {', '.join(ce.shown_for)})",
                ce.schedule.to_json(), f"saved to {ce.file}\nreplay with: {ce.replay}", "",
                *story_lines(ce), "timeline of that run:", timeline(ce.history, marks=evidence_marks(ce))]
    return "\n".join(out)
