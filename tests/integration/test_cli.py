"""The command line as a user runs it: search, replay, compare, JSON, JUnit, exit codes."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pg_job_chaos import properties
from pg_job_chaos.core.schedule import JobSpec, Schedule
from tests.conftest import run_cli

pytestmark = pytest.mark.integration


def test_search_finds_shrinks_saves_and_replays(tmp_path):
    out = tmp_path / "r.json"
    junit = tmp_path / "r.xml"
    r = run_cli("--design", "lease", "--faults", "crash", "--time-scale", "0.2", "--examples", "5",
                "--seed", "3", "--json", str(out), "--junit", str(junit), "--out", str(tmp_path / "ce"),
                timeout=600)
    assert r.returncode == 1, r.stderr
    data = json.loads(out.read_text())
    assert set(data) == {"design", "tenant_mode", "faults", "examples", "seed", "server", "properties",
                         "counterexample", "shrink_runs", "small_scope_runs", "coverage", "retry_spacing",
                         "bodies_at_once", "never_struck",
                         "budget_spent", "exit_reason", "no_fault_could_strike", "timing", "fail_on",
                         "allowed_violations", "failing", "failed", "waits", "design_warnings",
                         "runs", "seconds", "first_failure"}
    # the run that first failed the gate: within the search's runs, after at least one (issue 48)
    assert 1 <= data["first_failure"]["runs"] <= data["runs"]
    assert 0 < data["first_failure"]["seconds"] <= data["seconds"]
    assert data["timing"] == {}  # a built-in design keeps every ratio: it has none of a library's
    assert data["design_warnings"] == []  # nothing declared wrong (core/misdeclared.py)
    assert data["exit_reason"] in ("shrunk", "shrink_budget") and data["failed"] and \
        not data["no_fault_could_strike"]
    assert data["server"]["pg_version"] == 17 and data["server"]["pooler"] is None
    # 5 points x 2 shapes, no fault x 2, and crash on the first execution only (a transient fault): 13;
    # crash at lease's 8 statement points of the job (before and after lease.claim, lease.finish and their
    # COMMITs) x 1 and 2 workers: 16; crash spending 2 attempts, the last clean: 1
    assert data["small_scope_runs"] == 13 + 16 + 1 and data["never_struck"] == [] and not data["budget_spent"]
    assert data["retry_spacing"]["retries"] >= 1  # a crashed job came back
    # lease's worker loop runs one job at a time (core/overlap.py), whatever its pool
    assert data["bodies_at_once"]["worker"] == 1 and data["bodies_at_once"]["run"] >= 1
    named = {"before-tenant", "after-insert", "mid-work", "after-effect", "before-finish"}
    struck = set(data["coverage"]["crash"])  # the body's named points, and the statement points cut
    assert named <= struck and {"sql:commit:body.finish_run:after", "sql:lease.finish"} <= struck, struck
    assert all(p in named or p.startswith("sql:") for p in struck), struck
    assert (data["design"], data["tenant_mode"], data["faults"], data["examples"], data["seed"]) == (
        "lease", "local", ["crash"], 5, 3)
    # every property that applies: no failover's without a replica, no fairness without a workload
    shown = properties.applying(replica=False, workload=False)
    assert list(data["properties"]) == shown
    assert data["properties"]["terminal-states"]["status"] == "violated"
    # a violated row names the schedule its evidence comes from, shrunk for it, and its replay command
    assert set(data["properties"]["terminal-states"]) == {"status", "count", "jobs", "evidence", "schedule",
                                                         "replay", "shrink", "event"}
    # and the event its evidence names (issue 50): a job it names, the one left behind
    terminal = data["properties"]["terminal-states"]
    assert terminal["event"]["job"] in terminal["jobs"]
    ce = data["counterexample"]
    assert ce["violated"] and ce["replay"] == f"pg-job-chaos replay {ce['file']}"
    assert ce["schedule"]["jobs"] and len(ce["schedule"]["jobs"]) <= 2
    assert "Counterexample" in r.stdout and "timeline of that run:" in r.stdout and ce["replay"] in r.stdout
    # The counterexample is the first violated property's in the table (at-most-once-effects: a crash
    # after the effect); terminal-states' own schedule is saved, shrunk for it, and named on its row.
    assert ce["shown_for"][0] == "at-most-once-effects" and ce["shrink"] == "shrunk", ce
    row = data["properties"]["terminal-states"]
    assert row["shrink"] == "shrunk" and row["replay"] in r.stdout and row["replay"].endswith(row["schedule"])
    stuck = re.search(r"\[\d+\] [a-z-, ]*terminal-states[a-z-, ]*: \d+ jobs?, .*: (\S+)", r.stdout)
    assert stuck and stuck[1] == row["schedule"], r.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == set(shown)
    assert cases["terminal-states"].find("failure") is not None
    assert cases["tenant-isolation"].find("failure") is None
    # The saved schedule replays to the same violation, and the replay's JSON says so.
    again = run_cli("--replay", stuck[1], "--json", str(tmp_path / "again.json"), timeout=300)
    assert again.returncode == 1
    assert json.loads((tmp_path / "again.json").read_text())["properties"]["terminal-states"]["status"] == \
        "violated"
    # Replayed on another design, the same schedule holds where that design has a sweep.
    other = run_cli("--replay", stuck[1], "--design", "lease-heartbeat", "--json",
                    str(tmp_path / "hb.json"), timeout=300)
    assert json.loads((tmp_path / "hb.json").read_text())["properties"]["terminal-states"]["status"] \
        == "held", other.stdout


def test_fault_free_search_exits_0(tmp_path):
    r = run_cli("--design", "lease-heartbeat", "--time-scale", "0.2", "--examples", "3", "--seed", "1",
                "--out", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "VIOLATED" not in r.stdout


def test_no_small_scope_runs_only_the_generated_examples(tmp_path):
    out = tmp_path / "n.json"
    # without the flag, the same search runs 2 small-scope schedules before its 3 examples
    r = run_cli("--design", "lease-heartbeat", "--time-scale", "0.2", "--examples", "3", "--seed", "1",
                "--no-small-scope", "--json", str(out), "--out", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    assert data["small_scope_runs"] == 0 and data["runs"] == 3, data["runs"]


@pytest.mark.xdist_group("compare_cli")  # one compare for both (conftest.compare_cli)
def test_compare_runs_the_same_schedules_on_every_design(compare_cli):
    r, d = compare_cli
    out = d / "c.json"
    assert r.returncode == 1, r.stderr
    data = json.loads(out.read_text())
    assert set(data) >= {"faults", "schedules", "designs"}
    assert list(data["designs"]) == ["one-transaction", "lease-heartbeat"]
    assert len(data["schedules"]) >= 1
    one, hb = (data["designs"][d]["properties"] for d in ("one-transaction", "lease-heartbeat"))
    # Seed 2 draws a crash job (the schedules are in the JSON): the verdicts follow from it.
    assert any(j.get("fault") == "crash" for s in data["schedules"] for j in s["jobs"]), data["schedules"]
    assert one["bounded-blast-radius"]["status"] == "violated"
    assert hb["bounded-blast-radius"]["status"] == "held"
    assert "properties x designs" in r.stdout


PLUGIN = """
from pg_job_chaos.workers.builtin.lease import LeaseFenced


class MyDesign(LeaseFenced):
    name = "my-design"
"""


@pytest.mark.parametrize("form", ["file", "module"])
def test_plugin_design_from_a_file_outside_the_repository(tmp_path, form):
    (tmp_path / "my_design.py").write_text(PLUGIN)
    p = tmp_path / "s.json"
    p.write_text(Schedule(jobs=(JobSpec(1), JobSpec(2, tenant=3)), time_scale=0.2).to_json())
    spec = f"{tmp_path / 'my_design.py'}:MyDesign" if form == "file" else "my_design:MyDesign"
    r = run_cli("replay", str(p), "--design", spec, "--json", str(tmp_path / "r.json"), timeout=300,
                cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "VIOLATED" not in r.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["design"] == spec and data["properties"]["single-commit"]["status"] == "held"


def test_plugin_that_raises_at_import_is_a_usage_error(tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('no config')\n")
    r = run_cli("--design", f"{tmp_path / 'broken.py'}:X", "--faults", "crash", timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "broken.py raised RuntimeError: no config" in r.stderr


def test_fail_on_and_allow_gate_the_exit_code_json_and_junit(tmp_path):
    """lease under crash re-sends effects and can leave a job running: allowed, the run passes (exit 0)
    and says what it allowed; the search makes no counterexample of an allowed violation, and saves the
    schedule its row names as found (not shrunk)."""
    out, junit = tmp_path / "g.json", tmp_path / "g.xml"
    r = run_cli("--design", "lease", "--faults", "crash", "--time-scale", "0.2", "--examples", "1",
                "--seed", "1", "--fail-on", "safety", "--allow", "at-most-once-effects", "--json", str(out),
                "--junit", str(junit), "--out", str(tmp_path / "ce"), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    assert "at-most-once-effects" in data["allowed_violations"] and data["failing"] == [] and \
        not data["failed"]
    assert "at-most-once-effects" not in data["fail_on"] and "single-commit" in data["fail_on"]
    assert data["properties"]["at-most-once-effects"]["status"] == "violated"  # still judged and shown
    assert data["counterexample"] is None
    allowed = data["properties"]["at-most-once-effects"]
    assert allowed["shrink"] == "as found" and Path(allowed["schedule"]).parent == tmp_path / "ce"
    assert "(as found: not gated, not shrunk)" in r.stdout and "Counterexample" not in r.stdout
    assert "allowed by --fail-on/--allow" in r.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "0"
