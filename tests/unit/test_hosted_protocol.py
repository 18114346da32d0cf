"""Protocol v2 without a database: options and factories, unmapped states, concurrent executions,
'no fault could strike', what a saved schedule records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pg_job_chaos import properties
from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.history import History
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.engine.outcome import Run, SearchOutcome
from pg_job_chaos.workers import load_design, parse_options
from pg_job_chaos.workers.hosted import HostedDesign, claimed, job_args

PLUGIN = '''
from pg_job_chaos.workers.hosted import HostedDesign


class Mine(HostedDesign):
    name = "mine"
    OPTIONS = {"poll": "seconds between polls"}

    def install(self, conn, *, worker_role):
        pass


def factory(**options):
    return Mine(**options)


instance = Mine()
'''


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(PLUGIN)
    return str(path)


def test_options_reach_a_class_and_a_factory(plugin):
    assert load_design(f"{plugin}:Mine", {"poll": "0.5"}).options == {"poll": "0.5"}
    assert load_design(f"{plugin}:factory", {"poll": "2"}).options == {"poll": "2"}
    assert load_design(f"{plugin}:instance").options == {}


def test_bad_options_are_usage_errors_naming_the_known_ones(plugin):
    with pytest.raises(UsageError, match="unknown option 'speed'; options: poll"):
        load_design(f"{plugin}:Mine", {"speed": "1"})
    with pytest.raises(UsageError, match="is an object, not a class or factory"):
        load_design(f"{plugin}:instance", {"poll": "1"})
    with pytest.raises(UsageError, match="cannot be built with the options given"):
        load_design("lease", {"poll": "1"})
    with pytest.raises(UsageError, match="expected key=value"):
        parse_options(["poll"])
    assert parse_options(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}


def test_a_library_that_is_not_installed_says_which_extra(monkeypatch, tmp_path):
    from pg_job_chaos import workers

    (tmp_path / "fake_adapter.py").write_text("import no_such_queue_library\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(workers.LIBRARIES, "nolib", "fake_adapter:Nothing")
    with pytest.raises(UsageError, match=r"cannot import fake_adapter.*no_such_queue_library.*"
                                         r"pip install 'pg-job-chaos\[libraries\]'"):
        load_design("nolib")
    # The adapter module itself missing is not a missing extra: no hint that would send the user astray.
    monkeypatch.setitem(workers.LIBRARIES, "noadapter", "pg_job_chaos.adapters.no_such_adapter:Nothing")
    with pytest.raises(UsageError, match="cannot import pg_job_chaos.adapters.no_such_adapter") as info:
        load_design("noadapter")
    assert "pip install" not in str(info.value)


def test_job_args_round_trip_to_the_body_s_job():
    job = JobSpec(7, tenant=3, duration=0.2, fault="crash", point="mid-work")
    args = json.loads(json.dumps(job_args(job)))  # what a library stores and hands back
    c = claimed(args, attempt=2)
    assert (c.id, c.tenant, c.attempt, c.duration, c.fault, c.point) == (7, 3, 2, 0.2, "crash", "mid-work")


def test_versions_name_the_library():
    class D(HostedDesign):
        library = "psycopg"

    assert D().versions()["psycopg"].startswith("3.")
    assert HostedDesign().versions() == {}


def test_saved_schedule_keeps_options_and_versions():
    s = Schedule(jobs=(JobSpec(1),), design="procrastinate", design_options={"queue": "q"},
                 libraries={"procrastinate": "3.10.0"})
    again = Schedule.from_dict(json.loads(s.to_json()))
    assert again == s and hash(again) == hash(s)
    with pytest.raises(UsageError, match="field design_options.queue: expected str"):
        Schedule.from_dict({**json.loads(s.to_json()), "design_options": {"queue": 1}})


def _history(records, jobs) -> History:
    return History(schedule=Schedule(jobs=(JobSpec(1), JobSpec(2))).to_dict(), design="x",
                   tenant_mode="local", records=records, jobs=jobs, runs=[], exits=[], t0=0.0, t1=10.0)


def test_an_unmapped_status_is_unknown_never_held():
    jobs = [{"id": 1, "tenant_id": 1, "status": "succeeded", "attempts": 1},
            {"id": 2, "tenant_id": 1, "status": "done", "attempts": 1}]
    results = properties.check(_history([], jobs), ["progress", "terminal-states", "attempts-counted"])
    for r in results.values():
        assert r.status == properties.UNKNOWN and "status 'succeeded'" in r.evidence, r
    jobs[0]["status"] = "done"
    jobs[1]["attempts"] = "one"
    assert properties.check(_history([], jobs), ["attempts-counted"])["attempts-counted"].status == "unknown"


def test_one_worker_may_run_two_jobs_at_once():
    rec = lambda t, ev, job, **kw: {"t": t, "worker": "w1.0", "event": ev, "job": job, "attempt": 1, **kw}  # noqa: E731
    records = [rec(1, "started", 1), rec(2, "started", 2), rec(3, "effect", 1), rec(4, "finished", 2),
               rec(5, "finished", 1)]
    ex = {e.job: e for e in _history(records, []).executions()}
    assert (ex[1].start, ex[1].end, ex[1].effects, ex[1].outcome) == (1, 5, 1, "ok")
    assert (ex[2].start, ex[2].end, ex[2].effects, ex[2].outcome) == (2, 4, 0, "ok")


def test_no_strike_point_only_when_no_execution_reached_any():
    from pg_job_chaos.faults.catalogue import CATALOGUE

    def run(records):
        h = _history(records, [])
        return Run(Schedule(jobs=(JobSpec(1),)), {}, h, 0.1)

    reached = [{"t": 1, "worker": "w", "event": "finished", "job": 1, "points": ["mid-work"]}]
    silent = [{"t": 1, "worker": "w", "event": "worker-start"}]
    faults = [CATALOGUE["crash"]]
    assert SearchOutcome(runs=[run(silent), run(silent)]).no_strike_point(faults)
    assert not SearchOutcome(runs=[run(silent), run(reached)]).no_strike_point(faults)
    assert not SearchOutcome(runs=[run(silent)]).no_strike_point([])  # no fault allowed: nothing to strike


def test_the_library_findings_counterexamples_still_load():
    """Every shrunk schedule the README and the docs link (docs/compare/: the library findings' three
    matrices) exists and loads."""
    from pg_job_chaos.harness.engine.schedules import load

    root = Path(__file__).parents[2]
    cited: set[str] = set()
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        for link in re.findall(r"\]\(([\w./-]*compare/[\w/-]+\.json)\)", page.read_text()):
            cited.add((page.parent / link).resolve().relative_to(root).as_posix())
    cited = sorted(cited)
    # the three matrices' S1-S5, S1-S5, S1-S6
    assert len([c for c in cited if not c.endswith("compare.json")]) >= 10, cited
    assert {"docs/compare/procrastinate/compare.json", "docs/compare/chancy/compare.json",
            "docs/compare/pgqueuer/compare.json"} <= set(cited), cited
    for name in cited:
        if name.endswith("compare.json"):
            assert set(json.loads((root / name).read_text())) >= {"schedules", "designs"}, name
        else:
            assert load(root / name).jobs, name
