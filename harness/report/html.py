"""``--html FILE``: one self-contained page per search, replay or compare (no network, no CDN).

The page holds the property table, the compare matrix, and for every counterexample its story: a "what
happened" paragraph (:mod:`.story`), the events the evidence names in words, and a timeline -- one lane per
worker identity (a restart is a new identity, so a new lane), split into a row per server session when the
worker used more than one; each execution a bar labelled ``job N · tenant T · attempt A``, filled with its
tenant's colour and ending in how it ended (done, failed, died, fenced out); marks for lease expiry, fault
strikes, side effects, commits, process deaths, sampled transactions past the horizon threshold and the
event each violated property's evidence names (a span, such as a starved job's wait, hatched). Every bar and
mark carries its job, attempt, tenant, worker and session as data attributes; the axis ends at the run's
end (marks after it are counted, not drawn); a label that does not fit its bar shortens, else moves to the
hover; the page opens on the first counterexample's event. Hovering shows a record, clicking pins it. The
saved schedule and the replay command go beside it. Experiments' PNG curves go in as ``data:`` images.

The page's layout and script live in ``report.html`` beside this module; this module only turns
histories into plain JSON data (:func:`timeline_data`) and fills the template (:func:`write`). The page
measures itself and says so on its elements (``data-labels-overlapping``, ``data-focus-in-view``,
``data-draw-ms``), which the browser tests read.
"""

from __future__ import annotations

import base64
import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ...core.events import LogEvent
from ...core.history import Execution, History, WorkerExit
from ...properties.core import Mark
from ...properties.health import horizon_threshold

TEMPLATE = Path(__file__).with_name("report.html")
_COMMIT_EVENTS = {LogEvent.FINISHED}
EVIDENCE = "evidence"  # the kind of the marks the evidence names
FENCED_OUT = "fenced out"
# A mark this close after the run's end is at its end (times are rounded to 0.1 ms): not folded away.
SAME_INSTANT = 1e-3
Of = tuple[str | None, int | None, int | None]  # what a mark is of: (worker, job, attempt), where known


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else round(t - t0, 4)


def _lane_key(worker: str):
    slot, _, gen = worker.lstrip("w").partition(".")
    return (0, int(slot), int(gen)) if slot.isdigit() and gen.isdigit() else (1, 0, 0, worker)


def ended(ex: Execution, exits: dict[str, WorkerExit]) -> str:
    """How an execution ended, in the words its bar ends with: ``done``, ``failed``, ``fenced out``,
    ``died`` (its worker died under it) or ``unfinished`` (the run ended under it)."""
    if ex.fenced:
        return FENCED_OUT
    if ex.outcome == "ok":
        return "done"
    if ex.outcome == "fail":
        return "failed"
    x = exits.get(ex.worker)
    return "died" if ex.process_ended or (x is not None and not x.by_harness) else "unfinished"


def bar_label(job: int, tenant: int | None, attempt: int) -> str:
    """``job N · tenant T · attempt A``: what a bar says (``no tenant`` for a system job)."""
    return f"job {job} · {'no tenant' if tenant is None else f'tenant {tenant}'} · attempt {attempt}"


def _rows(executions: list[Execution], workers: list[str]) -> tuple[list[dict], dict]:
    """The timeline's rows: one per worker identity, and inside it one per server session (connection)
    when the worker's executions ran on more than one; and each (worker, session)'s row index."""
    conns: dict[str, list] = {w: [] for w in workers}
    for ex in executions:
        if ex.server_pid is not None and ex.server_pid not in conns[ex.worker]:
            conns[ex.worker].append(ex.server_pid)
    rows: list[dict] = []
    index: dict = {}
    for w in workers:
        lane = conns[w] if len(conns[w]) > 1 else [conns[w][0] if conns[w] else None]
        index[(w, None)] = len(rows)  # a mark with no session: the worker's first row
        for c in lane:
            index[(w, c)] = len(rows)
            rows.append({"worker": w, "conn": c, "first": c == lane[0], "sessions": len(conns[w])})
    return rows, index


def timeline_data(h: History, events: Sequence[tuple[str, Mark]] = ()) -> dict:
    """The timeline of one run as JSON data, times in seconds since the run began: ``lanes`` (worker
    identities in start order, with pid and how each ended), ``rows`` (a lane, split per server session when
    it used more than one), ``tenants`` (the jobs' tenants, the most jobs first: the legend's order),
    ``bars`` (executions, each with its row, job, attempt, tenant, session and how it ended), ``marks``
    (lease expiries, strikes, effects, commits, deaths, transactions past the horizon threshold; each with
    the job, attempt, tenant, worker and session it is of, where known). Marks after the run's end are
    left out and counted in ``folded`` (kind -> count): the axis ends at the run's end. *events*:
    ``(property, Mark)``, the events the evidence names, drawn as ``evidence`` marks (``property``; ``from``
    where the event is a span) on the row of the execution they are of (across every row when they are of
    no worker's); ``focus``: the index of the first of them, the mark the page opens on (None: none)."""
    d = _Drawing(h)
    for ex in d.executions:
        d.bar(ex)
    for ex in d.executions:
        who = (ex.worker, ex.job, ex.attempt)
        if ex.lease_until is not None:
            d.mark("lease", ex.lease_until, f"lease of job {ex.job} attempt {ex.attempt} expires",
                   {"job": ex.job, "attempt": ex.attempt, "lease_until": ex.lease_until}, who)
        for t in ex.effect_times:
            d.mark("effect", t, f"side effect of job {ex.job} attempt {ex.attempt}",
                   {"job": ex.job, "attempt": ex.attempt, "t": t}, who)
        for f in ex.faults:
            d.mark("fault", f["t"], f"fault {f['fault']} strikes at {f['point']}", f, who)
    for r in h.records:
        if r.get("event") in _COMMIT_EVENTS:
            d.mark("commit", r["t"], f"job {r.get('job')} attempt {r.get('attempt')} committed", r,
                   (r.get("worker"), r.get("job"), r.get("attempt")))
    for i in h.injected:
        d.mark("fault", i["t"], f"supervisor: {i.get('fault')} (job {i.get('job')}, {i.get('point')})"
               + (f": {i['detail']}" if i.get("detail") else ""), i,
               (i.get("worker"), i.get("job"), i.get("attempt")))
    for s in _held_back(h):
        d.mark("horizon", s["t"], f"transaction open {s['xact_age']:.2f} s (sampled; over "
                                  f"{s['threshold']:.2f} s)", s["record"], (s["worker"], None, None),
               since=s["t"] - s["xact_age"])
    for x in h.exits:
        if not x.by_harness:
            d.mark("death", x.t, f"{x.worker} (pid {x.pid}) ended: {x.told()}", vars(x),
                   (x.worker, x.job, x.attempt))
    for name, e in events:
        on_clock = {"t": _rel(e.t, h.t0)} | ({"since": _rel(e.since, h.t0)} if e.since is not None else {})
        d.mark(EVIDENCE, e.t, f"{name}: {e.what or e.kind}", {"property": name, **e.to_dict(), **on_clock},
               (e.worker or None, e.job, e.attempt), since=e.since, prop=name)
    return d.data()


class _Drawing:
    """The rows, bars and marks of one run's timeline as :func:`timeline_data` builds them."""

    def __init__(self, h: History) -> None:
        self.h = h
        self.lanes: dict[str, dict] = {}
        for r in sorted(h.records, key=lambda r: r["t"]):
            self.lane(r.get("worker"))
        for x in h.exits:
            self.lane(x.worker).update(pid=x.pid, outcome=x.outcome)
        self.executions = h.executions()
        for ex in self.executions:
            self.lane(ex.worker)
        self.order = sorted(self.lanes, key=_lane_key)  # w1.0, w1.1 (its restart), w2.0, ...
        self.rows, self.row_of = _rows(self.executions, self.order)
        self.tenant_of = {j.id: j.tenant for j in h.schedule.jobs}
        for ex in self.executions:
            self.tenant_of.setdefault(ex.job, ex.tenant)
        self.exits = {x.worker: x for x in h.exits}
        self.bars: list[dict] = []
        self.marks: list[dict] = []
        self.where: dict[tuple, dict] = {}  # (worker, job, attempt) -> its bar's row and session

    def lane(self, worker: str | None) -> dict:
        w = worker or "?"
        return self.lanes.setdefault(w, {"worker": w, "pid": None, "outcome": None})

    def bar(self, ex: Execution) -> None:
        row = self.row_of.get((ex.worker, ex.server_pid), self.row_of[(ex.worker, None)])
        tenant = ex.tenant if ex.tenant is not None else self.tenant_of.get(ex.job)
        self.where[(ex.worker, ex.job, ex.attempt)] = {"row": row, "conn": ex.server_pid}
        self.bars.append({"lane": ex.worker, "row": row, "conn": ex.server_pid, "job": ex.job,
                          "attempt": ex.attempt, "tenant": tenant, "start": _rel(ex.start, self.h.t0),
                          "end": _rel(ex.end, self.h.t0), "label": bar_label(ex.job, tenant, ex.attempt),
                          "outcome": ex.outcome, "ended": ended(ex, self.exits),
                          "record": {k: v for k, v in vars(ex).items() if v not in (None, [], False)}})

    def mark(self, kind: str, t: float, label: str, record: dict, of: Of, *, since: float | None = None,
             prop: str | None = None) -> None:
        """A mark at *t* of (worker, job, attempt) *of*: on its execution's row where it has one, else on
        the worker's first row, else across every row (``row`` -1)."""
        worker, job, attempt = of
        w = self.lane(worker)["worker"] if worker else None
        if attempt is None and w is not None:  # the worker's latest execution of the job by then
            attempt = max((ex.attempt for ex in self.executions if ex.worker == w and ex.job == job
                           and ex.start <= t), default=None)
        at = self.where.get((w, job, attempt)) or {"row": self.row_of.get((w, None), -1), "conn": None}
        m = {"kind": kind, "t": _rel(t, self.h.t0), "label": label, "record": record, "lane": w,
             "row": at["row"], "job": job, "attempt": attempt,
             "tenant": self.tenant_of.get(job) if job is not None else None, "conn": at["conn"]}
        if since is not None:
            m["from"] = _rel(since, self.h.t0)
        if prop is not None:
            m["property"] = prop
        self.marks.append(m)

    def data(self) -> dict:
        for r in self.rows:
            lane = self.lanes[r["worker"]]
            r.update(pid=lane["pid"], outcome=lane["outcome"])
        end = _rel(self.h.t1, self.h.t0)
        kept, folded = _fold(self.marks, end)
        jobs = Counter(self.tenant_of.values())
        return {"lanes": [self.lanes[w] for w in self.order], "rows": self.rows, "bars": self.bars,
                "marks": kept, "end": end, "folded": folded, "ended_by": self.h.ended_by,
                "notes": self.h.notes,
                "tenants": [t for t, _ in sorted(jobs.items(), key=lambda kv: (-kv[1], str(kv[0])))],
                "focus": next((i for i, m in enumerate(kept) if m["kind"] == EVIDENCE), None)}


def _fold(marks: list[dict], end: float | None) -> tuple[list[dict], dict[str, int]]:
    """*marks* without those after the run's *end*, and how many of each kind were left out (an evidence
    mark is never left out: one past the end is drawn at the end)."""
    kept = []
    folded: Counter[str] = Counter()
    for m in marks:
        if end is not None and m["t"] is not None and m["t"] > end + SAME_INSTANT:
            if m["kind"] != EVIDENCE:
                folded[m["kind"]] += 1
                continue
            m["t"] = end
        kept.append(m)
    return kept, dict(folded)


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


def counterexample(*, name: str, schedule_json: str, file: str | None, replay: str | None,
                   violated: list[str], history: History, shown_for: Sequence[str] = (), how: str = "",
                   events: Sequence[tuple[str, Mark]] = (), story: Sequence[tuple[str, str]] = (),
                   replays: str = "") -> dict:
    """One counterexample section: what it violates, the schedule, the replay command, the timeline;
    *shown_for*: the properties whose rows name it, *how* it was reached, *events*: ``(property,
    Mark)`` the evidence names, marked on the timeline; *story*: ``(property, what happened)``, the
    paragraphs said above it (:mod:`.story`); *replays*: how its replays went (a search's)."""
    return {"name": name, "schedule": schedule_json, "file": file, "replay": replay, "violated": violated,
            "shown_for": list(shown_for), "how": how, "timeline": timeline_data(history, events),
            "story": [{"property": n, "text": t} for n, t in story], "replays": replays}


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
