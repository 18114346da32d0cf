"""One counterexample per violated property (issue 36, item 4), on real runs: a planted design that
violates two gated properties gets two schedules, each shrunk for its own property, each replaying to
that property's violation; the report's rows name them and the tenant leak's statement is marked."""

from __future__ import annotations

import json

import pytest

from pg_job_chaos.faults import parse_faults
from pg_job_chaos.harness.bench import planted
from pg_job_chaos.harness.engine.outcome import SHRUNK
from pg_job_chaos.harness.engine.search import search
from pg_job_chaos.harness.report import build, files, text
from pg_job_chaos.properties import check
from pg_job_chaos.workers import load_design
from tests.conftest import parallel_options

pytestmark = [pytest.mark.chaos]

SCALE = 0.2
TWO = ("tenant-isolation", "at-most-once-effects")


def test_two_violated_properties_get_two_shrunk_schedules_each_replaying_its_violation(runner, tmp_path):
    # SessionTenant sets the tenant for the session: the next job on that connection inherits it (a
    # leak needs two jobs); a crash after the effect re-sends it (one job).
    out = search(runner.run, faults=parse_faults("crash"), design=load_design(planted.spec("SessionTenant")),
                 tenant_mode="local", examples=6, seed=1, time_scale=SCALE, small_scope=False,
                 **parallel_options(runner))
    assert set(TWO) <= set(out.shown), {n: s.how for n, s in out.shown.items()}
    report = build.search_report(out, faults=parse_faults("crash"), design=planted.spec("SessionTenant"),
                                 tenant_mode="local", examples=6, seed=1, server={}, stamp=lambda s: s,
                                 out_dir=tmp_path)
    data = json.loads(json.dumps(report.to_json(), default=str))
    for name in TWO:
        saved = report.schedule_for(name)
        assert out.shown[name].how == SHRUNK and saved.how == SHRUNK
        assert len(saved.schedule.jobs) <= 2, saved.schedule.to_json()
        assert data["properties"][name]["schedule"] == str(saved.file)
        again = check(runner.run(saved.schedule))[name]  # its replay violates it again
        assert again.status == "violated", again.evidence
    # the counterexample is tenant-isolation's (the table's first), and its timeline marks the statement
    assert report.counterexample.shown_for[0] == "tenant-isolation"
    printed = text.render(report)
    assert ">>> tenant-isolation: job" in printed, printed
    page = files.page(report)
    marks = [m for m in page["counterexamples"][0]["timeline"]["marks"] if m["kind"] == "evidence"]
    assert marks and "tenant-isolation" in marks[0]["label"]
    assert all(page["schedules"][n]["file"] == str(report.schedule_for(n).file) for n in TWO)
