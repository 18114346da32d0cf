"""The HTML page's data: one lane per worker identity, a bar per execution, every kind of mark."""

from __future__ import annotations

import json
import re

from pg_job_chaos import properties
from pg_job_chaos.core.history import History, WorkerExit
from pg_job_chaos.harness.report import html
from pg_job_chaos.properties import failover
from pg_job_chaos.properties.core import Mark


def _history() -> History:
    records = [
        {"t": 10.1, "worker": "w1.0", "event": "started", "job": 1, "attempt": 1, "tenant": 1,
         "fault": "crash", "lease_until": 11.1},
        {"t": 10.2, "worker": "w1.0", "event": "effect", "job": 1, "attempt": 1},
        {"t": 10.3, "worker": "w1.0", "event": "fault", "job": 1, "attempt": 1, "fault": "crash",
         "point": "mid-work"},
        {"t": 10.5, "worker": "w10.0", "event": "started", "job": 2, "attempt": 1, "tenant": 2},
        {"t": 10.6, "worker": "w10.0", "event": "failed", "job": 2, "attempt": 1,
         "error": "</script><b>boom"},
        {"t": 11.5, "worker": "w1.1", "event": "started", "job": 1, "attempt": 2, "tenant": 1},
        {"t": 11.7, "worker": "w1.1", "event": "finished", "job": 1, "attempt": 2},
        {"t": 11.75, "worker": "w1.1", "event": "started", "job": 3, "attempt": 1, "tenant": 1,
         "lease_until": 13.0},  # its lease expires after the run's end: folded into a count
        {"t": 11.76, "worker": "w1.1", "event": "tenant-inherited", "job": 3, "attempt": 1, "value": "1",
         "backend": 501},
        {"t": 11.78, "worker": "w1.1", "event": "finished", "job": 3, "attempt": 1},
        {"t": 11.8, "worker": "w1.1", "event": "started", "job": 4, "attempt": 1, "tenant": 2},
        {"t": 11.81, "worker": "w1.1", "event": "tenant-inherited", "job": 4, "attempt": 1, "value": "",
         "backend": 502},
        {"t": 11.85, "worker": "w1.1", "event": "finished", "job": 4, "attempt": 1},
    ]
    exits = [WorkerExit("w1.0", 101, 10.35, "exit 1", code=1, job=1, attempt=1),
             WorkerExit("w1.1", 102, 12.0, "budget", by_harness=True),
             WorkerExit("w10.0", 103, 12.0, "budget", by_harness=True)]
    injected = [{"t": 10.25, "worker": "w1.0", "fault": "pause", "job": 1, "attempt": 1, "point": "mid-work"}]
    samples = [  # threshold: half a lease of 1 s at time scale 0.2 = 0.1 s
        {"t": 10.3, "role": "worker", "app": "w1.0", "pid": 7, "xid": "900", "xact_age": 0.15},
        {"t": 10.32, "role": "worker", "app": "w1.0", "pid": 7, "xid": "900", "xact_age": 0.2},
        {"t": 10.6, "role": "worker", "app": "w10.0", "pid": 8, "xid": None, "xmin": None, "xact_age": 0.3},
        {"t": 10.6, "role": "worker", "app": "w1.1/heartbeat", "pid": 9, "xmin": "5", "xact_age": 0.05},
    ]
    jobs = [{"id": 1, "tenant": 1}, {"id": 2, "tenant": 2}, {"id": 3, "tenant": 1}, {"id": 4, "tenant": 2}]
    return History(schedule={"jobs": jobs, "timing": {"lease": 1.0}, "time_scale": 0.2}, design="lease",
                   tenant_mode="local", records=records, jobs=[], runs=[], exits=exits, injected=injected,
                   samples=samples, ended_by="quiescent", t0=10.0, t1=12.0)


def test_timeline_lanes_bars_and_marks():
    tl = html.timeline_data(_history())
    assert [lane["worker"] for lane in tl["lanes"]] == ["w1.0", "w1.1", "w10.0"]  # a restart: its own lane
    assert tl["lanes"][0]["pid"] == 101 and tl["lanes"][0]["outcome"] == "exit 1"
    bars = {(b["lane"], b["job"], b["attempt"]): b for b in tl["bars"]}
    assert set(bars) == {("w1.0", 1, 1), ("w10.0", 2, 1), ("w1.1", 1, 2), ("w1.1", 3, 1), ("w1.1", 4, 1)}
    assert bars[("w1.0", 1, 1)]["label"] == "job 1 · tenant 1 · attempt 1"
    assert bars[("w1.0", 1, 1)]["outcome"] == "info" and bars[("w1.1", 1, 2)]["outcome"] == "ok"
    # how each ended: its worker died under it, it failed, it committed
    assert [bars[k]["ended"] for k in [("w1.0", 1, 1), ("w10.0", 2, 1), ("w1.1", 1, 2)]] == \
        ["died", "failed", "done"]
    assert bars[("w1.0", 1, 1)]["start"] == 0.1 and bars[("w1.0", 1, 1)]["end"] <= 0.35
    kinds = {m["kind"] for m in tl["marks"]}
    assert kinds == {"lease", "effect", "fault", "commit", "death", "horizon"}
    # the session's oldest sample, over the threshold
    (span,) = [m for m in tl["marks"] if m["kind"] == "horizon"]
    assert span["lane"] == "w1.0" and span["from"] == 0.12 and span["t"] == 0.32
    death = next(m for m in tl["marks"] if m["kind"] == "death")
    assert death["lane"] == "w1.0" and "pid 101" in death["label"]  # workers ended by the harness: no mark
    assert death["job"] == 1 and death["tenant"] == 1 and death["row"] == bars[("w1.0", 1, 1)]["row"]
    assert sum(m["kind"] == "fault" for m in tl["marks"]) == 2  # the in-job strike and the supervisor's
    assert tl["end"] == 2.0 and tl["ended_by"] == "quiescent"
    # the axis ends at the run's end: job 3's lease expiry after it is counted, not drawn
    assert tl["folded"] == {"lease": 1} and all(m["t"] <= tl["end"] for m in tl["marks"])
    assert tl["tenants"] == [1, 2] and tl["focus"] is None


def test_a_worker_on_two_sessions_gets_a_row_for_each():
    tl = html.timeline_data(_history())
    w11 = [r for r in tl["rows"] if r["worker"] == "w1.1"]
    assert [r["conn"] for r in w11] == [501, 502] and w11[0]["first"] and not w11[1]["first"]
    row = {(b["job"], b["attempt"]): b["row"] for b in tl["bars"]}
    assert tl["rows"][row[(3, 1)]]["conn"] == 501 and tl["rows"][row[(4, 1)]]["conn"] == 502
    assert row[(1, 2)] == row[(3, 1)]  # no session recorded: the worker's first row
    assert len([r for r in tl["rows"] if r["worker"] == "w1.0"]) == 1


def test_an_evidence_mark_sits_on_its_executions_row_and_the_page_focuses_it():
    h = _history()
    wait = Mark(11.8, "wait", "w1.1", 4, "tenant 2's job 4 waited 1.80 s", since=10.0)
    leak = Mark(11.76, "statement", "w1.1", 3, 'job 3 ran "select 1" as tenant 2', attempt=1)
    tl = html.timeline_data(h, [("starvation-bound", wait), ("tenant-isolation", leak)])
    ev = [m for m in tl["marks"] if m["kind"] == "evidence"]
    assert tl["focus"] == tl["marks"].index(ev[0])
    row = {(b["job"], b["attempt"]): b["row"] for b in tl["bars"]}
    assert (ev[0]["row"], ev[0]["job"], ev[0]["attempt"], ev[0]["tenant"], ev[0]["conn"]) == \
        (row[(4, 1)], 4, 1, 2, 502)  # its attempt found from its worker and job
    assert ev[0]["from"] == 0.0 and ev[0]["t"] == 1.8 and ev[0]["property"] == "starvation-bound"
    assert (ev[1]["row"], ev[1]["conn"], ev[1]["tenant"]) == (row[(3, 1)], 501, 1)
    assert 'ran "select 1" as tenant 2' in ev[1]["label"]
    across = html.timeline_data(h, [("acknowledged-enqueue", Mark(12.5, "failover", "", 2, "lost"))])
    (m,) = [m for m in across["marks"] if m["kind"] == "evidence"]
    assert m["row"] == -1 and m["t"] == across["end"]  # of no worker: across the rows; never folded


def test_the_page_is_one_file_and_its_data_cannot_close_the_script(tmp_path):
    h = _history()
    results = properties.check(h)
    page = html.write(tmp_path / "sub" / "p.html", title="a <title>", tables=[("properties", results)],
                      counterexamples=[html.counterexample(name="ce", schedule_json="{}", file="f.json",
                                                           replay="python run.py --replay f.json",
                                                           violated=[], history=h)])
    text = page.read_text()
    assert "<title>a &lt;title&gt;</title>" in text
    blob = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S).group(1)
    data = json.loads(blob)  # the whole data, unbroken by the "</script>" inside an error message
    assert data["counterexamples"][0]["replay"] == "python run.py --replay f.json"
    # no failover's without a replica, no fairness without a workload
    shown = properties.applying(replica=False, workload=False)
    assert [r["property"] for r in data["tables"][0]["rows"]] == shown
    assert not set(failover.REPLICA_ONLY) & set(shown) and "starvation-bound" not in shown
    assert "</script><b>boom" in json.dumps(data)
