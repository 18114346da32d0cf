"""``--html FILE``: one self-contained page per search, replay or compare (no network, no CDN).

The page holds the property table, the compare matrix, and for every counterexample a timeline:
one lane per worker identity (a restart is a new identity, so a new lane), each execution a bar
labelled ``job/attempt``, with marks for lease expiry, fault strikes, side effects, commits,
process deaths and sampled transactions past the horizon threshold; hovering a mark shows its
record, clicking pins it below. The saved schedule and the replay command go beside it.
Experiments' PNG curves go in as ``data:`` images.

The page's layout and script live in ``report.html`` beside this module; this module only turns
histories into plain JSON data (:func:`timeline_data`) and fills the template (:func:`write`).
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from pathlib import Path

from ...core.events import LogEvent
from ...core.history import History
from ...properties.health import horizon_threshold

TEMPLATE = Path(__file__).with_name("report.html")
_COMMIT_EVENTS = {LogEvent.FINISHED}


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else round(t - t0, 4)


def _lane_key(worker: str):
    slot, _, gen = worker.lstrip("w").partition(".")
    return (0, int(slot), int(gen)) if slot.isdigit() and gen.isdigit() else (1, 0, 0, worker)


def timeline_data(h: History) -> dict:
    """The timeline of one run as JSON data: ``lanes`` (worker identities in start order, with pid
    and how each ended), ``bars`` (executions), ``marks`` (lease expiries, strikes, effects, commits,
    deaths), times in seconds since the run began; every bar and mark carries its ``record``."""
    t0 = h.t0
    lanes: dict[str, dict] = {}

    def lane(worker: str | None) -> str:
        w = worker or "?"
        lanes.setdefault(w, {"worker": w, "pid": None, "outcome": None})
        return w

    for r in sorted(h.records, key=lambda r: r["t"]):
        lane(r.get("worker"))
    for x in h.exits:
        lanes.setdefault(x.worker, {"worker": x.worker, "pid": None, "outcome": None}).update(
            pid=x.pid, outcome=x.outcome)
    bars = []
    marks = []
    for ex in h.executions():
        rec = {k: v for k, v in vars(ex).items() if v not in (None, [], False)}
        bars.append({"lane": lane(ex.worker), "start": _rel(ex.start, t0), "end": _rel(ex.end, t0),
                     "label": f"{ex.job}/{ex.attempt}", "outcome": ex.outcome, "record": rec})
        if ex.lease_until is not None:
            marks.append({"lane": ex.worker, "t": _rel(ex.lease_until, t0), "kind": "lease",
                          "label": f"lease of job {ex.job} attempt {ex.attempt} expires", "record": rec})
        for t in ex.effect_times:
            marks.append({"lane": ex.worker, "t": _rel(t, t0), "kind": "effect",
                          "label": f"side effect of job {ex.job} attempt {ex.attempt}", "record": rec})
        for f in ex.faults:
            marks.append({"lane": ex.worker, "t": _rel(f["t"], t0), "kind": "fault",
                          "label": f"fault {f['fault']} strikes at {f['point']}", "record": f})
    for r in h.records:
        if r.get("event") in _COMMIT_EVENTS:
            marks.append({"lane": lane(r.get("worker")), "t": _rel(r["t"], t0), "kind": "commit",
                          "label": f"job {r.get('job')} attempt {r.get('attempt')} committed", "record": r})
    for i in h.injected:
        marks.append({"lane": lane(i.get("worker")), "t": _rel(i["t"], t0), "kind": "fault",
                      "label": f"supervisor: {i.get('fault')} (job {i.get('job')}, {i.get('point')})",
                      "record": i})
    for s in _held_back(h):
        marks.append({"lane": lane(s["worker"]), "t": _rel(s["t"], t0),
                      "from": _rel(s["t"] - s["xact_age"], t0), "kind": "horizon", "record": s["record"],
                      "label": f"transaction open {s['xact_age']:.2f} s "
                               f"(sampled; over {s['threshold']:.2f} s)"})
    for x in h.exits:
        if not x.by_harness:
            marks.append({"lane": x.worker, "t": _rel(x.t, t0), "kind": "death",
                          "label": f"{x.worker} (pid {x.pid}) ended: {x.told()}", "record": vars(x)})
    order = sorted(lanes, key=_lane_key)  # w1.0, w1.1 (its restart), w2.0, ...
    return {"lanes": [lanes[w] for w in order], "bars": bars, "marks": marks, "end": _rel(h.t1, t0),
            "ended_by": h.ended_by, "notes": h.notes}


def _held_back(h: History) -> list[dict]:
    """Per worker session, its oldest sample holding an xid or snapshot past the horizon property's
    threshold (the span drawn is that transaction's age when sampled); none for a design the property
    does not judge by a lease (``horizon_threshold``: the design's own lease, not always the schedule's)."""
    threshold = horizon_threshold(h).seconds
    if threshold is None:
        return []
    oldest: dict = {}
    for s in h.samples:
        if s.get("role") != "worker" or s.get("xact_age") is None or s["xact_age"] <= threshold:
            continue
        if s.get("xid") is None and s.get("xmin") is None:
            continue
        if s.get("pid") not in oldest or s["xact_age"] > oldest[s.get("pid")]["xact_age"]:
            oldest[s.get("pid")] = s
    return [{"worker": (s.get("app") or "?").split("/")[0], "t": s["t"], "xact_age": s["xact_age"],
             "threshold": threshold, "record": s} for s in oldest.values()]


def evidence_mark(name: str, event, t0: float) -> dict:
    """A timeline mark for the event *name*'s evidence names (``properties.core.Mark``): a line across
    every lane (on its worker's lane when it has one), labelled with the property."""
    return {"lane": event.worker or None, "t": _rel(event.t, t0), "kind": "evidence",
            "label": f"{name}: {event.what or event.kind}", "record": {"property": name, **event.to_dict()}}


def counterexample(*, name: str, schedule_json: str, file: str | None, replay: str | None,
                   violated: list[str], history: History, shown_for: Sequence[str] = (), how: str = "",
                   events: Sequence[tuple[str, object]] = (), replays: str = "") -> dict:
    """One counterexample section: what it violates, the schedule, the replay command, the timeline;
    *shown_for*: the properties whose rows name it, *how* it was reached, *events*: ``(property,
    Mark)`` the evidence names, marked on the timeline; *replays*: how its replays went (a search's)."""
    tl = timeline_data(history)
    tl["marks"] += [evidence_mark(n, e, history.t0) for n, e in events]
    return {"name": name, "schedule": schedule_json, "file": file, "replay": replay, "violated": violated,
            "shown_for": list(shown_for), "how": how, "timeline": tl, "replays": replays}


def results_rows(results: dict, schedules: dict | None = None) -> list[dict]:
    """The table's rows; *schedules*: property -> ``{"ref", "file", "replay", "shrink"}``, the schedule a
    violated property's row names."""
    return [{"property": n, **r.to_dict(), **((schedules or {}).get(n) or {})} for n, r in results.items()]


def image(path: str | Path, caption: str) -> dict:
    """A PNG curve, inlined as a ``data:`` URI (the page must load without the file beside it)."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return {"caption": caption, "src": f"data:image/png;base64,{data}"}


def write(path: str | Path, *, title: str, tables: Sequence[tuple[str, dict]] = (),
          matrix: dict | None = None, counterexamples: Sequence[dict] = (), images: Sequence[dict] = (),
          texts: Sequence[tuple[str, str]] = (), schedules: dict | None = None) -> Path:
    """Write the page to *path* and return it. *tables*: ``(caption, {property: Result})``;
    *matrix*: ``{design: {property: Result}}``; *counterexamples*: from :func:`counterexample`;
    *texts*: ``(caption, preformatted text)`` (experiments' reports); *images*: from :func:`image`;
    *schedules*: :func:`results_rows`'s (a search's rows then name their schedules)."""
    data = {
        "title": title,
        "tables": [{"caption": c, "rows": results_rows(r, schedules)} for c, r in tables],
        "matrix": None if matrix is None else {d: results_rows(r) for d, r in matrix.items()},
        "counterexamples": list(counterexamples),
        "images": list(images),
        "texts": [{"caption": c, "text": t} for c, t in texts],
    }
    # Hazard: the JSON sits inside a <script> element; "</" in any string (an error message quoting
    # HTML, say) would end it early. "<\/" means the same to JSON and cannot close the element.
    blob = json.dumps(data, default=str).replace("</", "<\\/")
    page = TEMPLATE.read_text().replace("__TITLE__", html.escape(title)).replace("__DATA__", blob)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out
