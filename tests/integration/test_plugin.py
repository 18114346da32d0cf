"""The pytest plugin as a user meets it: a project in tmp_path with its own design file."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

DESIGNS = """
from pg_job_chaos.workers.builtin.heartbeat import LeaseHeartbeat
from pg_job_chaos.workers.builtin.one_transaction import OneTransaction


class Careful(LeaseHeartbeat):
    name = "careful"


class Forgetful(OneTransaction):  # claims and counts in the work transaction: a crash forgets the attempt
    name = "forgetful"
"""

TESTS = """
import pytest
from hypothesis import given, settings

from pg_job_chaos import schedules


@pytest.mark.chaos_config(design="mydesign.py:Careful", faults="raise")
def test_careful_design_counts_and_finishes(chaos_run):
    result = chaos_run.search(seed=1)
    assert result.runs >= 3
    result.assert_held("single-commit", "attempts-counted", "bounded-attempts", "progress")


@settings(max_examples=2, deadline=None)
@given(schedules(design="mydesign.py:Careful", faults="raise", time_scale=0.2, max_jobs=2))
def test_my_own_given(chaos_session, schedule):
    chaos_session.run(schedule).assert_held("single-commit", "no-overlap")
"""

BUGGY = """
import pytest


@pytest.mark.chaos_config(design="mydesign.py:Forgetful", faults="crash", workers=1)
def test_forgetful_design_counts_attempts(chaos_run):
    chaos_run.search(seed=1).assert_held("attempts-counted")
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeini("[pytest]\nchaos_examples = 3\nchaos_time_scale = 0.2\n")
    pytester.makepyfile(mydesign=DESIGNS)
    return pytester


def test_a_user_project_runs_green(project: pytest.Pytester):
    project.makepyfile(test_careful=TESTS)
    r = project.runpytest_subprocess("-p", "pg_job_chaos.plugin", "--strict-markers", timeout=600)
    r.assert_outcomes(passed=2)


def test_a_buggy_design_fails_with_the_evidence(project: pytest.Pytester):
    project.makepyfile(test_buggy=BUGGY)
    r = project.runpytest_subprocess("-p", "pg_job_chaos.plugin", "--chaos-out", "found",
                                     "--chaos-html", "pages", timeout=600)
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "ChaosViolation" in out and "attempts-counted: violated" in out
    saved = sorted((project.path / "found").glob("*.json"))
    assert saved, out
    assert f"replay with: pg-job-chaos replay {saved[0]}" in out
    schedule = json.loads(saved[0].read_text())
    assert schedule["design"].endswith("mydesign.py:Forgetful") and schedule["jobs"]
    assert any(j.get("fault") == "crash" for j in schedule["jobs"])
    assert "timeline of that run:" in out
    page = project.path / "pages" / f"{saved[0].stem}.html"
    assert f"HTML page: {page}" in out and "mydesign.py:Forgetful" in page.read_text()
