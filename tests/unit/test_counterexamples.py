"""One counterexample per violated property (issue 36, item 4), without a database: the event a
violation's evidence names (``Result.event``), the per-property shrinker (``harness/engine/shrink.py``)
on hand-written runs, and the report's property -> schedule file -> replay command mapping, the same
in the text, the JSON and the HTML page's data."""

from __future__ import annotations

import json
import re
from datetime import datetime

from pg_job_chaos.core.schedule import Event, Schedule
from pg_job_chaos.harness.engine import shrink
from pg_job_chaos.harness.engine.outcome import AS_FOUND, BUDGET_SPENT, SHRUNK, Run, SearchOutcome
from pg_job_chaos.harness.report import build, files, html, text
from pg_job_chaos.properties import PROPERTIES, check
from tests.unit.test_properties import at, change, execution, history, job, lifecycle, run_row, sane, schedule
from tests.unit.test_statement_tenants import stmt
from tests.unit.test_success_final import SWEEP


def leak(more=False):
    """Job 2 (tenant 4) ran a statement as tenant 1 at 3.5 s: tenant-isolation, nothing else; *more*:
    job 1 leaked too, before it (the evidence then leads with job 1)."""
    return history(records=[*execution("w1.0", 1, 1, 1.0, 2.0), *execution("w1.0", 2, 1, 3.0, 4.0, tenant=4),
                            stmt(3.5, 2, "1"), *([stmt(1.5, 1, "3")] if more else [])],
                   jobs=[job(1), job(2, tenant=4)], runs=[run_row(1, 1), run_row(2, 1)])


def double():
    """Job 1 committed twice: single-commit, and tenant-isolation held."""
    return sane(runs=[run_row(1, 1), run_row(1, 2, "w2.0"), run_row(2, 1)])


def sched(*ids, workers=1, events=()) -> Schedule:
    return Schedule.from_dict(schedule(ids)).replace(workers=workers, events=tuple(events))


def fake(s: Schedule) -> Run:
    """A run of *s* as the two bugs would make it: the leak whenever job 2 runs (job 1's too where job 1
    runs beside it), else the double commit."""
    ids = {j.id for j in s.jobs}
    h = leak(more=1 in ids) if 2 in ids else double()
    return Run(s, check(h), h, 0.1)


def test_the_event_each_evidence_names():
    r = check(leak())["tenant-isolation"]
    assert (r.event.t, r.event.kind, r.event.worker, r.event.job) == (3.5, "statement", "w1.0", 2)
    assert 'as tenant 1' in r.event.what and r.to_dict()["event"]["t"] == 3.5
    overlap = check(sane(records=[*execution("w1.0", 1, 1, 0.0, 3.0, outcome="fenced"),
                                  *execution("w2.0", 1, 2, 1.5, 2.5)]))["no-overlap"]
    assert (overlap.event.t, overlap.event.worker, overlap.event.kind) == (1.5, "w2.0", "execution")
    # the sweep's write-back at 2.4 s, on the execution log's clock through a record's wall time
    wall = datetime.fromisoformat(at(1.0)).timestamp()
    records = [{**r, "wall": wall + r["t"] - 1.0} for r in execution("w1.0", 1, 1, 1.0, 2.0)]
    h = history(records=records, jobs=[job(1, "queued")], runs=[run_row(1, 1)], sched=schedule((1,)),
                transitions=[*lifecycle(1, 1.0, 2.0, first_seq=1),
                             change(4, 1, "done", "queued", 2.4, query=SWEEP)])
    final = check(h)["success-final"]
    assert final.event.kind == "status change" and abs(final.event.t - 2.4) < 1e-3, final.event
    # the second job_runs row's commit, on the same clock
    twice = sane(records=[{**r, "wall": wall + r["t"] - 1.0} for r in sane().records],
                 runs=[run_row(1, 1), run_row(1, 2, "w2.0", finished=2.7), run_row(2, 1)])
    commit = check(twice)["single-commit"].event
    assert (commit.kind, commit.worker, commit.job) == ("commit", "w2.0", 1) and abs(commit.t - 2.7) < 1e-3
    # a property that names no event still works; held results carry none
    assert check(double())["single-commit"].event is None and check(sane())["tenant-isolation"].event is None


def test_candidates_start_from_the_jobs_the_violation_names_and_are_all_smaller():
    s = sched(*range(1, 13), workers=3, events=[Event("pause", 5), Event("kill", None, point="sql:x")])
    first = next(shrink.candidates(s, (8,)))
    assert [j.id for j in first.jobs] == [8] and first.events == (Event("kill", None, point="sql:x"),)
    assert all(shrink.size(c) < shrink.size(s) for c in shrink.candidates(s, (8,)))


def test_shrinking_keeps_only_candidates_that_violate_that_property_and_stops_at_the_budget():
    start = fake(sched(*range(1, 13)))
    calls = []

    def execute(s):
        calls.append(s)
        return fake(s)

    best, done = shrink.shrink(start, "tenant-isolation", execute)
    assert done and [j.id for j in best.schedule.jobs] == [2] and "tenant-isolation" in best.violated
    # the two offending jobs of 12 (1 and 2), then each half of those: job 1 alone holds, job 2 alone leaks
    assert [[j.id for j in c.jobs] for c in calls] == [[1, 2], [1], [2]]
    best, done = shrink.shrink(start, "tenant-isolation", lambda s: None)
    assert not done and best is start


def outcome(gate=tuple(PROPERTIES)) -> SearchOutcome:
    """A search whose tenant leak was seen in a 12-job run and whose double commit in a 2-job run."""
    out = SearchOutcome(runs=[fake(sched(1, 3)), fake(sched(*range(1, 13)))], seconds=1.0, gate=gate)

    def execute(s):
        r = fake(s)
        out.runs.append(r)
        return r

    shrink.per_property(out, gate, execute, seen=lambda s: False, limit=40)
    out.choose(gate)
    return out


def report(out, tmp_path):
    return build.search_report(out, faults=[], design="lease", tenant_mode="local", examples=1, seed=1,
                               server={}, stamp=lambda x: x, out_dir=tmp_path, gate=out.gate)


def test_every_violated_property_names_its_own_shrunk_schedule_in_text_json_and_html(tmp_path):
    out = outcome()
    # the leak: jobs 1 and 2, then 1 alone (the double commit: single-commit reuses it), then 2 alone
    assert out.shrink_runs == 3
    assert {n: (len(s.run.schedule.jobs), s.how) for n, s in out.shown.items()} == {
        "tenant-isolation": (1, SHRUNK), "single-commit": (1, SHRUNK)}
    rep = report(out, tmp_path)
    # the counterexample is the first violated gated property's, in the table's order
    ce = rep.counterexample
    assert ce.shown_for == ("tenant-isolation",) and [j.id for j in ce.schedule.jobs] == [2]
    files_of = {n: rep.schedule_for(n).file for n in ("tenant-isolation", "single-commit")}
    assert len(set(files_of.values())) == 2 and all(f.exists() for f in files_of.values())
    # JSON: each violated row names its file and replay command; its evidence is that run's
    data = json.loads(json.dumps(rep.to_json(), default=str))
    for n, f in files_of.items():
        row = data["properties"][n]
        assert (row["schedule"], row["replay"], row["shrink"]) == (str(f), f"pg-job-chaos replay {f}", SHRUNK)
        saved = Schedule.from_dict(json.loads(f.read_text()))
        assert len(saved.jobs) == 1 and fake(saved).results[n].status == "violated"  # the file shows it
    assert data["properties"]["tenant-isolation"]["event"]["t"] == 3.5  # seconds since its run began
    # the row's evidence is the shrunk run's (job 2 alone), not the 12-job run's, which led with job 1
    assert data["properties"]["tenant-isolation"]["evidence"] == \
        'in 3 of 5 runs: job 2 (tenant 4) ran "select count(*) from documents" as tenant 1'
    assert data["counterexample"]["shown_for"] == ["tenant-isolation"]
    assert "schedule" not in data["properties"]["no-overlap"]
    # text: the rows point at [schedule K], the list under the table says which file and command
    out_text = text.render(rep)
    refs = rep.references()
    assert refs == {"tenant-isolation": 1, "single-commit": 2}
    table = out_text.split("schedules (each violated", 1)[0]
    cells = " ".join(line.split("│")[-2].strip() for line in table.splitlines() if line.count("│") > 2)
    assert re.search(r"job 2 \(tenant 4\) ran .* as tenant 1 \[schedule 1\]", cells), cells
    assert re.search(r"job 1 committed 2 job_runs rows \(attempts 1, 2\) \[schedule 2\]", cells), cells
    for n, k in refs.items():
        assert f"[{k}] {n}: 1 jobs, 1 workers (shrunk): {files_of[n]}" in out_text
        assert f"replay with: pg-job-chaos replay {files_of[n]}" in out_text
    # the printed timeline marks the statement that ran as the wrong tenant, at its time
    assert re.search(r"\+3\.500s  w1\.0   >>> tenant-isolation: job 2 ran .* as tenant 1", out_text), out_text
    # HTML: the same mapping in the table's rows, and the event marked on the counterexample's timeline
    page = files.page(rep)
    rows = {r["property"]: r for r in html.results_rows(page["tables"][0][1], page["schedules"])}
    for n, k in refs.items():
        assert (rows[n]["ref"], rows[n]["file"]) == (k, str(files_of[n]))
        assert rows[n]["replay"] == rep.saved[k - 1].replay == data["properties"][n]["replay"]
    marks = [m for m in page["counterexamples"][0]["timeline"]["marks"] if m["kind"] == "evidence"]
    assert [(m["t"], m["lane"]) for m in marks] == [(3.5, "w1.0")] and "tenant-isolation" in marks[0]["label"]
    assert [c["shown_for"] for c in page["counterexamples"]] == [["tenant-isolation"], ["single-commit"]]


def test_a_property_outside_the_gate_is_saved_as_found_and_not_the_counterexample(tmp_path):
    gate = tuple(n for n in PROPERTIES if n != "tenant-isolation")
    out = outcome(gate)
    assert out.shown["tenant-isolation"].how == AS_FOUND
    assert len(out.shown["tenant-isolation"].run.schedule.jobs) == 12  # not shrunk: as found
    rep = report(out, tmp_path)
    assert rep.counterexample.shown_for == ("single-commit",)
    assert "(as found: not gated, not shrunk)" in text.render(rep)
    assert rep.to_json()["properties"]["tenant-isolation"]["shrink"] == AS_FOUND


def test_a_shrink_cut_by_the_budget_says_so(tmp_path):
    out = SearchOutcome(runs=[fake(sched(*range(1, 13)))], seconds=1.0)
    shrink.per_property(out, tuple(PROPERTIES), fake, seen=lambda s: False, limit=0)  # no run left
    assert out.choose(tuple(PROPERTIES)) is out.runs[0] and out.shrink_budget_spent
    assert out.shown["tenant-isolation"].how == BUDGET_SPENT
    assert "shrink budget spent" in text.render(report(out, tmp_path))


def test_effect_properties_name_the_effect_sent_again_and_the_stale_one():
    from tests.unit.test_properties import paused_and_reclaimed

    h = sane(records=paused_and_reclaimed())  # w2.0's effect at 1.53 s, w1.0's late one at 2.9 s
    results = check(h)
    again, stale = results["at-most-once-effects"].event, results["no-stale-effect"].event
    assert (again.t, again.worker, again.kind) == (2.9, "w1.0", "effect"), again
    assert (stale.t, stale.worker, stale.job) == (2.9, "w1.0", 1) and "after w2.0 attempt 2" in stale.what
    lines = text.timeline(h, marks=[("no-stale-effect", stale)]).splitlines()
    at = [k for k, line in enumerate(lines) if "+2.900s" in line]
    assert "side effect" in lines[at[0]]
    assert ">>> no-stale-effect: job 1: w1.0 attempt 1 sends" in lines[at[1]]


def test_the_pytest_plugins_message_names_each_propertys_schedule_and_marks_the_event(tmp_path):
    from pg_job_chaos.results import ChaosResult

    rep = report(outcome(), tmp_path)
    message = ChaosResult.from_report(rep).explain()
    for n in ("tenant-isolation", "single-commit"):
        s = rep.schedule_for(n)
        assert f"its schedule (shrunk): {s.file}; replay with: {s.replay}" in message
    assert ">>> tenant-isolation: job 2 ran" in message and str(rep.counterexample.file) in message


def test_a_workload_schedule_keeps_its_jobs_and_shrinks_only_workers_events_and_faults():
    from pg_job_chaos.core.schedule import expand_workload
    from pg_job_chaos.core.workload import Workload

    s = expand_workload(sched(1).replace(workload=Workload(hot_jobs=3, small_jobs=1), workers=2))
    found = list(shrink.candidates(s, (1,)))
    assert found and all(len(c.jobs) == len(s.jobs) for c in found)
    assert all(c.to_dict() for c in found)  # each saves: it holds every job of its workload
