"""What a run prints: property tables, the designs-side-by-side matrix, a timeline, JSON, JUnit.

Plain text on purpose (it goes to terminals, CI logs and files alike); rich renders the tables.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

from rich.console import Console
from rich.table import Table

import properties
from core.history import History
from properties.effects import RETRY_ADVICE

SYMBOL = {"held": "held", "violated": "VIOLATED", "unknown": "unknown"}


def _render(table: Table) -> str:
    buf = io.StringIO()
    Console(file=buf, width=140, color_system=None, force_terminal=False).print(table)
    return buf.getvalue()


def property_table(results: dict, *, title: str) -> str:
    t = Table(title=title, title_justify="left")
    for col in ("property", "status", "count", "jobs", "evidence"):
        t.add_column(col, overflow="fold")
    for name, r in results.items():
        jobs = ",".join(map(str, r.jobs[:8])) + ("..." if len(r.jobs) > 8 else "")
        t.add_row(name, SYMBOL[r.status], str(r.count), jobs, r.evidence)
    return _render(t)


def matrix(per_design: dict[str, dict]) -> str:
    """properties x designs, each cell held / VIOLATED (count)."""
    designs = list(per_design)
    names = list(properties.PROPERTIES)
    t = Table(title="properties x designs (same schedules on every design)", title_justify="left")
    t.add_column("property")
    for d in designs:
        t.add_column(d)
    for n in names:
        cells = []
        for d in designs:
            r = per_design[d].get(n)
            cells.append("-" if r is None else SYMBOL[r.status] + (f" ({r.count})" if r.status == "violated" else ""))
        t.add_row(n, *cells)
    return _render(t)


def notes_for(results: dict) -> list[str]:
    """Plain sentences a user must not miss."""
    r = results.get("at-most-once-effects")
    if r is not None and r.status == "violated":
        return [f"at-most-once-effects is violated: no retrying design keeps it; {RETRY_ADVICE}."]
    return []


def timeline(h: History, *, limit: int = 200) -> str:
    """Which worker ran which attempt when, where faults struck, when leases expired, how workers ended."""
    t0 = h.t0
    lines: list[tuple[float, str, str]] = []
    for r in h.records:
        ev, w = r.get("event"), r.get("worker", "")
        what = f"job {r.get('job')} attempt {r.get('attempt')}" if "job" in r else ""
        if ev == "started":
            extra = f" (tenant {r.get('tenant')}" + (f", carries {r['fault']}" if r.get("fault") else "") + ")"
            lines.append((r["t"], w, f"{what} started{extra}"))
            if r.get("lease_until"):
                lines.append((r["lease_until"], "", f"lease of {what} ({w}) expires unless extended"))
        elif ev == "fault":
            lines.append((r["t"], w, f"{what}: fault {r.get('fault')} strikes at {r.get('point')}"))
        elif ev == "effect" and r.get("key") is not None:
            lines.append((r["t"], w, f"{what}: {r.get('relay') or 'relay'} sends effect {r['key']}"))
        elif ev == "effect":
            lines.append((r["t"], w, f"{what}: side effect"))
        elif ev == "accepted":
            lines.append((r["t"], w, f"{what}: the world accepted {r.get('key')}"))
        elif ev == "duplicate":
            lines.append((r["t"], w, f"{what}: the world acknowledged {r.get('key')} again, not done again"))
        elif ev == "session-cut":
            lines.append((r["t"], w, f"{what} session cut by the server ({r.get('reason')})".strip()))
        elif ev == "relay-error":
            lines.append((r["t"], w, f"{what} relay failed, left to the sweep: {r.get('error')}".strip()))
        elif ev in ("finished", "fenced", "lease-lost", "abandoned", "swept", "claim-failed", "worker-error"):
            detail = f": {r['error']}" if r.get("error") else ""
            lines.append((r["t"], w, f"{what} {ev}{detail}".strip()))
        elif ev == "failed":
            lines.append((r["t"], w, f"{what} failed: {r.get('error')}"))
    for x in h.injected:
        lines.append((x["t"], x["worker"], f"supervisor: {x['fault']} (job {x['job']} attempt {x['attempt']}, {x['point']})"))
    for x in h.exits:
        if not x.by_harness:
            inflight = f" during job {x.job} attempt {x.attempt}" if x.job is not None else ""
            lines.append((x.t, x.worker, f"process ended: {x.outcome}{inflight}"))
    lines = [ln for ln in sorted(lines) if ln[0] <= h.t1]
    out = [f"{t - t0:+8.3f}s  {w:<6} {text}" for t, w, text in lines[:limit]]
    if len(lines) > limit:
        out.append(f"... {len(lines) - limit} more events")
    out.append(f"{h.t1 - t0:+8.3f}s         run ended: {h.ended_by}")
    return "\n".join(out)


def results_json(results: dict) -> dict:
    return {n: r.to_dict() for n, r in results.items()}


def junit(path: str, suites: dict[str, dict]) -> None:
    """One test case per property (per design); a violation is a failure, unknown is skipped."""
    root = ET.Element("testsuites")
    for suite_name, results in suites.items():
        suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(results)),
                              failures=str(sum(r.status == "violated" for r in results.values())),
                              skipped=str(sum(r.status == "unknown" for r in results.values())))
        for n, r in results.items():
            case = ET.SubElement(suite, "testcase", classname=suite_name, name=n)
            if r.status == "violated":
                ET.SubElement(case, "failure", message=r.evidence).text = json.dumps(r.to_dict())
            elif r.status == "unknown":
                ET.SubElement(case, "skipped", message=r.evidence)
    ET.ElementTree(root).write(path, encoding="unicode", xml_declaration=True)
