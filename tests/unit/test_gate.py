"""--fail-on / --allow: which properties' violations fail a run, in the exit code, JSON, JUnit and the
search's own failure test."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pg_job_chaos import properties
from pg_job_chaos.core.errors import EXIT_HELD, EXIT_VIOLATED, UsageError
from pg_job_chaos.core.history import History
from pg_job_chaos.core.schedule import Schedule
from pg_job_chaos.harness.engine.search import search
from pg_job_chaos.harness.report import text
from pg_job_chaos.harness.report.result import Report
from pg_job_chaos.properties.core import Result
from pg_job_chaos.workers import DesignHandle, load_design


def _results(violated: tuple[str, ...] = ()) -> dict:
    return {n: Result(n, properties.VIOLATED if n in violated else properties.HELD, evidence="x")
            for n in properties.PROPERTIES}


def test_groups_cover_every_property_once():
    grouped = [n for g in properties.GROUPS.values() for n in g]
    assert sorted(grouped) == sorted(properties.PROPERTIES) and len(grouped) == len(set(grouped))


def test_gate_reads_names_and_groups_and_refuses_the_unknown():
    # the opt-in groups (fairness: judged only under a declared workload) are outside the default gate
    fair = properties.GROUPS["fairness"]
    assert properties.gate() == tuple(n for n in properties.PROPERTIES if n not in fair)
    assert properties.gate("all") == tuple(properties.PROPERTIES)
    assert properties.gate("liveness") == properties.GROUPS["liveness"]
    assert "at-most-once-effects" not in properties.gate(allow="at-most-once-effects")
    assert properties.gate("safety,horizon", "at-most-once-effects") == tuple(
        n for n in properties.PROPERTIES if n in properties.GROUPS["safety"] + ("horizon",)
        and n != "at-most-once-effects")
    with pytest.raises(UsageError, match="--allow 'nope': not a property or group; groups: all, safety"):
        properties.gate(allow="nope")
    with pytest.raises(UsageError, match="leave no property"):
        properties.gate("horizon", "resources")


def test_an_allowed_violation_does_not_fail_the_run_but_is_reported(tmp_path):
    gate = properties.gate(allow="at-most-once-effects")
    r = Report("search", "lease", {"lease": _results(("at-most-once-effects",))}, gate=gate)
    assert r.exit_code() == EXIT_HELD and r.allowed() == ["at-most-once-effects"] and r.failing() == []
    r2 = Report("search", "lease", {"lease": _results(("at-most-once-effects", "single-commit"))}, gate=gate)
    assert r2.exit_code() == EXIT_VIOLATED and r2.failing() == ["single-commit"]
    path = tmp_path / "j.xml"
    text.junit(str(path), r2.suites, gate=gate)
    cases = {c.get("name"): c for c in ET.parse(path).getroot().iter("testcase")}
    assert cases["single-commit"].find("failure") is not None
    assert "allowed" in cases["at-most-once-effects"].find("skipped").get("message")
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite.get("failures") == "1" and suite.get("skipped") == "1"


def test_strict_ignores_an_allowed_property_that_could_not_decide():
    res = _results()
    res["horizon"] = Result("horizon", properties.UNKNOWN, evidence="no samples")
    assert Report("search", "x", {"x": res}, strict=True,
                  gate=properties.gate(allow="horizon")).exit_code() == EXIT_HELD
    assert Report("search", "x", {"x": res}, strict=True).exit_code() == EXIT_VIOLATED


def _history(schedule: Schedule) -> History:
    """A run in which no job was ever taken: every job still queued at the end (terminal-states)."""
    return History(schedule=schedule.to_dict(), design=schedule.design, tenant_mode=schedule.tenant_mode,
                   records=[], jobs=[{"id": j.id, "status": "queued", "attempts": 0, "max_attempts": 3}
                                          for j in schedule.jobs], runs=[],
                   exits=[], injected=[], samples=[], ended_by="stalled", t0=0.0, t1=1.0, notes=[], server={})


def test_the_search_shrinks_only_a_gated_violation():
    """A run function whose every history leaves jobs queued violates progress and terminal-states: with
    both allowed, the search finds nothing to shrink and keeps no counterexample."""
    ran = []
    handle = load_design("lease")

    def run(s: Schedule, *, design: DesignHandle) -> History:
        assert design is handle  # the search passes on the handle it was given
        ran.append(s)
        return _history(s)

    kw = dict(faults=(), design=handle, tenant_mode="local", examples=3, seed=1, time_scale=0.2,
              database=None)
    everything = search(run, **kw)
    assert everything.counterexample is not None and "terminal-states" in everything.counterexample.violated
    gate = properties.gate(allow="progress,terminal-states")
    allowed = search(run, gate=gate, **kw)
    assert allowed.counterexample is None and allowed.aggregate()["terminal-states"].status == "violated"


def test_stop_at_first_starts_nothing_after_the_first_gated_failure_but_shrinks_it():
    """Every run violates terminal-states: the whole search runs the small-scope pass and the budget;
    stopping at the first failure runs one schedule, then only the shrinking's, and keeps the
    counterexample (the same property, replayed)."""
    handle = load_design("lease")
    kw = dict(faults=(), design=handle, tenant_mode="local", examples=3, seed=1, time_scale=0.2,
              database=None, gate=("terminal-states",))
    ran: dict[bool, list[str]] = {False: [], True: []}
    outs = {}
    for first in (False, True):
        def run(s: Schedule, *, design: DesignHandle, first=first) -> History:
            ran[first].append(s.to_json())
            return _history(s)
        outs[first] = search(run, stop_at_first=first, **kw)
    whole, hunt = outs[False], outs[True]
    assert whole.small_scope_runs > 1 and len(ran[False]) > len(ran[True])
    assert hunt.small_scope_runs == 1, hunt.small_scope_runs
    assert hunt.counterexample is not None and "terminal-states" in hunt.counterexample.violated
    assert hunt.replayed is not None and ran[True][0] == hunt.runs[0].schedule.to_json()
    # after the first run, only the shrinker's candidates and the replay ran: none was a new example
    assert all(r.label == "" or r is hunt.runs[0] for r in hunt.runs), [r.label for r in hunt.runs]
