"""A :class:`~harness.report.result.Report` written to the files the user asked for: ``--json`` (``-``:
standard output), ``--junit`` and ``--html``. The same for every command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import html, story, text, waits
from .result import Report


def page(report: Report) -> dict:
    """:func:`harness.report.html.write`'s arguments for *report*."""
    numbered = report.kind == "search"  # as the text's [schedule K]
    shown = [html.counterexample(name=f"[{k}] {s.name}" if numbered else s.name,
                                 schedule_json=s.schedule.to_json(), file=str(s.file), replay=s.replay,
                                 violated=s.violated, history=s.history,
                                 shown_for=s.shown_for, how=s.how, events=text.evidence_marks(s),
                                 story=story.paragraphs(s.history, s.results, text.shown_names(s)),
                                 replays=text.replay_state(report) if numbered and k == 1 and report.replays
                                 else "")
             for k, s in enumerate(report.saved, 1) if s.history is not None]
    if report.kind == "compare":
        return {"title": report.title, "matrix": report.suites, "counterexamples": shown}
    schedules = {n: {"ref": k, "file": str(report.saved[k - 1].file), "replay": report.saved[k - 1].replay,
                     "shrink": report.saved[k - 1].how}
                 for n, k in (report.references() if report.kind == "search" else {}).items()}
    return {"title": report.title, "tables": [("properties", report.results)], "counterexamples": shown,
            "schedules": schedules, **_waits(report.data.get("waits"))}


def _waits(data: dict | None) -> dict:
    """The per-tenant waits' table and plot (:mod:`.waits`), for a run with more than one tenant."""
    if not data:
        return {}
    shown = waits.plot(data)
    return {"texts": [("waits per tenant", "\n".join(waits.lines(data)))], "images": [shown] if shown else []}


def write(report: Report, *, json_path: str | None = None, junit_path: str | None = None,
          html_path: str | None = None) -> list[str]:
    """Write the files; returns the lines to tell the user (where the HTML page went)."""
    said = []
    if html_path:
        said.append(f"HTML report: {html.write(html_path, **page(report))}")
    if json_path == "-":
        sys.stdout.write(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    elif json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    if junit_path:
        Path(junit_path).parent.mkdir(parents=True, exist_ok=True)
        text.junit(junit_path, report.suites, strict=report.strict, gate=report.gate)
    return said
