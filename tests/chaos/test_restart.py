"""The restart fault: the server stops in immediate mode while a job runs and starts again. Runs on
a server of its own with durable settings (as the command line starts one for restart)."""

from __future__ import annotations

import json

import psycopg
import pytest

from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.harness.postgres import provision
from pg_job_chaos.harness.postgres.local import DURABLE_SETTINGS
from pg_job_chaos.harness.runner import Runner
from pg_job_chaos.properties import HELD, check
from tests.conftest import run_cli

pytestmark = pytest.mark.chaos

SCALE = 0.2


@pytest.fixture(scope="module")
def durable():
    with provision(settings=DURABLE_SETTINGS) as db, Runner(db) as runner:
        yield runner


@pytest.mark.parametrize("design", ["one-transaction", "lease", "lease-heartbeat"])
def test_restart_mid_job_keeps_the_committed_claim_loses_the_uncommitted_run(durable, design):
    schedule = Schedule(jobs=(JobSpec(1, duration=1.0), JobSpec(2)), design=design, time_scale=SCALE,
                        events=(Event("restart", 1, point="mid-work", duration=2.0),))
    h = durable.run(schedule)
    assert h.server["settings"] == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
    assert [i["fault"] for i in h.injected] == ["restart", "server-started"]
    assert h.ended_by == "quiescent"  # workers and pools recovered; the run did not hang
    first = [e for e in h.executions() if e.job == 1][0]
    assert first.outcome != "ok"  # its session broke under it
    assert [j["status"] for j in h.jobs] == ["done", "done"]
    results = check(h)
    # The claim (committed before the stop) survived: every execution is counted (one-transaction
    # counts inside its work transaction, which the stop rolled back: that is the design's loss).
    if design != "one-transaction":
        assert results["attempts-counted"].status == HELD and h.jobs[0]["attempts"] == 2
    # The first execution's job_runs row was uncommitted: gone; one committed row per job.
    assert results["single-commit"].status == HELD
    assert sorted((r["job_id"], r["attempt"]) for r in h.runs)[0][0] == 1
    assert len([r for r in h.runs if r["job_id"] == 1]) == 1
    with psycopg.connect(durable.database.admin_dsn) as conn:  # the server is up again for the next run
        assert conn.execute("select 1").fetchone() == (1,)


def test_restart_needs_the_local_server(tmp_path):
    s = tmp_path / "s.json"
    s.write_text(json.dumps({"jobs": [{"id": 1}], "events": [{"fault": "restart", "job": 1}]}))
    r = run_cli("replay", str(s), "--postgres", "postgresql://x:y@127.0.0.1:1/z", timeout=60)
    assert r.returncode == 2 and "restart fault needs the local server" in r.stderr and \
        r.stderr.count("\n") == 1
    with pytest.raises(UsageError):
        from pg_job_chaos.harness.session import server_settings

        class A:
            postgres = "docker"
            replica = None

        server_settings(A, ["restart"])


def test_a_search_with_restart_runs_on_durable_settings(tmp_path):
    out = tmp_path / "out.json"
    # --budget: what this checks is the server the search provisions, not what the search finds
    # (the schedules above judge restart itself); 97 s without it.
    r = run_cli("--design", "lease-heartbeat", "--faults", "restart", "--examples", "2", "--seed", "1",
                "--time-scale", "0.2", "--workers", "1", "--budget", "10", "--json", str(out),
                "--out", str(tmp_path), timeout=600)
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(out.read_text())
    assert data["small_scope_runs"] >= 1  # a run did happen on that server
    assert data["server"]["settings"]["fsync"] == "on" and \
        data["server"]["settings"]["synchronous_commit"] == "on"


def test_restart_behind_pgbouncer_recovers_after_its_login_retry():
    schedule = Schedule(jobs=(JobSpec(1, duration=1.0), JobSpec(2)), design="lease", time_scale=SCALE,
                        events=(Event("restart", 1, point="mid-work", duration=2.0),))
    with provision(settings=DURABLE_SETTINGS, pooler="pgbouncer:transaction") as db, Runner(db) as runner:
        h = runner.run(schedule)
    assert h.ended_by == "quiescent", h.notes  # PgBouncer reconnected to the server; so did the worker
    assert [j["status"] for j in h.jobs] == ["done", "done"]
    assert check(h)["single-commit"].status == HELD
