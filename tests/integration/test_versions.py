"""PostgreSQL 15 and 17: the experiments that differ by version run on both (``--pg-version``; the
horizon on 17 in test_experiments.py), a run records the server it ran on, and a version that is not
installed is one line, exit 3."""

from __future__ import annotations

import json

import pytest

from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.experiments import run_experiment
from pg_job_chaos.harness.postgres import binaries, provision
from pg_job_chaos.harness.runner import Runner
from tests.conftest import run_cli

pytestmark = pytest.mark.integration

VERSIONS = (15, 17)


def _installed(v: int) -> bool:
    try:
        binaries.find(version=v)
        return True
    except Exception:
        return False


@pytest.fixture(scope="module", params=VERSIONS, ids=lambda v: f"pg{v}")
def versioned(request):
    if not _installed(request.param):  # .ci/run installs both; say why, never pass silently
        pytest.fail(f"PostgreSQL {request.param} is not installed: {binaries.INSTALL_HINT[request.param]}")
    with provision(pg_version=request.param) as db:
        yield db


def _by(rows, *keys):
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


def _run(name, db):
    result = run_experiment(name, db, quick=True, progress=lambda _m: None)
    json.dumps(result)
    assert result["server_version"] // 10000 == db.major
    return result


def test_leak_on_each_version(versioned):
    rows = _by(_run("leak", versioned)["rows"], "tenant_mode", "tenant2_fails")
    assert rows[("session", False)]["counts_after"] == [20000, 10000, 6666]
    assert rows[("session", True)]["counts_after"] == [20000, 20000, 6666]
    assert rows[("local", False)]["counts_after"] == [0, 0, 0]


def test_reset_cost_on_each_version(versioned):
    rows = _by(_run("reset-cost", versioned)["rows"], "variant")
    assert rows["discard-all"]["failed_at_job"] == [7, 7]
    assert rows["discard-all-unprepared"]["errors"] == [0, 0]
    assert rows["reset"]["connections_opened"] == [1, 1]


# On 17, the default server, tests/integration/test_experiments.py::test_horizon_held_grows_free_does_not
# runs the horizon experiment with more checks: here it runs on the other version only.
@pytest.mark.parametrize("versioned", [15], indirect=True, ids=["pg15"])
def test_horizon_quick_on_pg15(versioned):
    result = _run("horizon", versioned)
    series = {s["variant"]: s["block_median_ms"] for s in result["series"]}

    def growth(xs):
        return (xs[-1] + xs[-2]) / (xs[0] + xs[1])

    assert growth(series["held-xid"]) > 2 * growth(series["none"])
    assert result["explain"]["held"]["shared_buffers"] > result["explain"]["free"]["shared_buffers"]


def test_a_run_records_its_server_and_a_saved_schedule_replays_on_it(versioned, tmp_path):
    with Runner(versioned) as runner:
        history = runner.run(Schedule(jobs=(JobSpec(1),), design="lease", time_scale=0.2))
    assert history.schedule.pg_version == versioned.major
    assert history.server["pg_version"] == versioned.major
    assert set(history.server["settings"]) == {"fsync", "synchronous_commit", "full_page_writes"}
    saved = tmp_path / "s.json"
    saved.write_text(history.schedule.to_json())
    out = tmp_path / "out.json"
    r = run_cli("replay", str(saved), "-q", "--json", str(out), timeout=300)
    assert r.returncode == 0, r.stderr
    # The replay ran on the version the schedule names, without being told.
    assert json.loads(out.read_text())["server"]["pg_version"] == versioned.major


def test_a_version_not_installed_is_one_line_and_exit_3():
    r = run_cli("--pg-version", "9", "--faults", "crash", timeout=60)
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "PostgreSQL 9 is not installed: apt-get install -y postgresql-9" in lines[0]


def test_pg_bin_and_pg_version_together_is_a_usage_error(tmp_path):
    r = run_cli("--pg-bin", str(tmp_path), "--pg-version", "15", "--faults", "crash", timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give one of them" in r.stderr
