"""PgBouncer between the workers and the server (``--pooler``): what crosses from one worker to
another through transaction pooling, what pool-hygiene makes of psycopg's prepared statements
there, and that nothing of PgBouncer is left behind, even after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.experiments import run_experiment
from pg_job_chaos.harness.postgres import local, pgbouncer, provision
from pg_job_chaos.harness.runner import Runner
from pg_job_chaos.properties import HELD, VIOLATED, check
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.integration


def _bouncers() -> list[str]:
    return subprocess.run(["pgrep", "-f", f"pgbouncer {local.RUNS_DIR}/run-"], capture_output=True,
                          text=True).stdout.split()


@pytest.fixture(scope="module")
def pooled():
    with provision(pooler="pgbouncer:transaction") as db:
        yield db


def test_session_mode_through_transaction_pooling_names_the_other_workers_job():
    """One server connection for two workers, each worker allowed six dequeues, eleven jobs: both outcomes
    below are forced, whatever the machine's timing (issue 51: this test used to run up to four times).

    Every transaction holds the one server session to its end (the lease design's work transaction too:
    jobs run one at a time on it), so the workers' jobs form one sequence on one session, and a worker's
    first job after the other's inherits the other's session-level tenant: a crossing, since each worker
    runs at least five jobs (eleven, at most six each). psycopg prepares a query at its sixth execution,
    naming it ``_pg3_0`` (then ``_pg3_1``...) per connection: the first worker to send its sixth claim
    prepares ``_pg3_0`` on that session (ten claims at most came before it: it gets a job, and nothing
    rolls back: DEALLOCATE ALL follows a rollback); the other's sixth claim -- its last dequeue, a job or
    none -- finds ``_pg3_0`` there: "already exists", on every run."""
    jobs = tuple(JobSpec(i, tenant=i) for i in range(1, 12))
    schedule = Schedule(jobs=jobs, workers=2, design="lease", tenant_mode="session", time_scale=0.2,
                        dequeues=6)
    with provision(pooler="pgbouncer:transaction:1") as db, Runner(db) as runner:
        history = runner.run(schedule)
    assert history.schedule.pooler == history.server["pooler"] == "pgbouncer:transaction:1"
    results = check(history)
    assert results["tenant-isolation"].status == VIOLATED
    # Every point logged the server session it was on, read with pg_backend_pid().
    sessions = [r for r in history.records if r.get("event") == "server-session"]
    assert sessions and all(isinstance(r["backend"], int) for r in sessions if r["point"] == "after-insert")
    assert len({r["backend"] for r in sessions if r["point"] == "after-insert"}) == 1  # the one session
    ran = Counter(ex.worker for ex in history.executions())
    assert sorted(ran.values()) == [5, 6], ran
    inherited = [ex for ex in history.executions() if ex.inherited]
    assert any(ex.inherited_from and ex.inherited_from.split()[0] != ex.worker for ex in inherited), \
        [(ex.worker, ex.job, ex.inherited, ex.inherited_from) for ex in inherited]
    assert "another worker's job" in results["tenant-isolation"].evidence
    # The collision, named by pool-hygiene: the one claim that failed, on the worker that ran five jobs.
    hygiene = results["pool-hygiene"]
    failed = [r for r in history.records if "prepared statement" in str(r.get("error") or "")]
    fewer = min(ran, key=ran.__getitem__)
    assert [(r["event"], r["worker"]) for r in failed] == [("claim-failed", fewer)], failed
    assert 'prepared statement "_pg3_0" already exists' in failed[0]["error"]
    assert hygiene.status == VIOLATED, hygiene.evidence
    assert "1 prepared-statement error, the first (claim-failed on " in hygiene.evidence


def test_admin_goes_direct_workers_through_pgbouncer(pooled):
    assert pooled.pooler == "pgbouncer:transaction" and "PgBouncer 1." in pooled.server
    with psycopg.connect(pooled.worker_dsn, autocommit=True) as a, \
            psycopg.connect(pooled.worker_dsn, autocommit=True) as b:
        a.execute("select set_config('app.tenant', '7', false)")
        tenant, visible = b.execute("select current_setting('app.tenant', true), count(*) "
                                    "from invoices").fetchone()
    assert (tenant, visible) == ("7", 2857)  # another client's session-level setting, and tenant 7's rows
    with psycopg.connect(pooled.direct_worker_dsn, autocommit=True) as c:
        assert c.execute("select current_setting('app.tenant', true)").fetchone()[0] in (None, "")


def test_local_mode_with_prepare_threshold_none_holds_through_the_pooler():
    with provision(pooler="pgbouncer:transaction") as db:  # fresh: no session left with a tenant on it
        schedule = Schedule(jobs=tuple(JobSpec(i, tenant=i) for i in range(1, 5)), workers=2, design="lease",
                            tenant_mode="discard-all-unprepared", time_scale=0.2)
        with Runner(db) as runner:
            results = check(runner.run(schedule.replace(tenant_mode="local")))
            assert results["tenant-isolation"].status == HELD
            unprepared = check(runner.run(schedule))
    # discard-all-unprepared: prepare_threshold=None, the setting that avoids the prepared-statement errors
    assert "prepared statement" not in unprepared["pool-hygiene"].evidence


def test_leak_experiment_prints_the_pooler_beside_direct(pooled):
    rows = {(r["tenant_mode"], r["tenant2_fails"]): r for r in run_experiment(
        "leak", pooled, quick=True, progress=lambda _m: None)["rows"]}
    session = rows[("session", False)]
    assert session["counts_after"] == session["via_pgbouncer:transaction"] == [20000, 10000, 6666]
    assert session["other_worker_after"] == [0, 0, 0]  # direct: another client never sees it
    assert session["other_worker_via_pgbouncer:transaction"] == [20000, 10000, 6666]


def test_pooler_spec_errors():
    r = run_cli("--pooler", "pgpool", "--faults", "crash", timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and \
        "pgbouncer[:transaction|session[:N]]" in r.stderr
    env = dict(os.environ, PGBOUNCER="/nonexistent", PATH="/nonexistent")
    # Not installed: one line naming the package, exit 3 (before any server starts).
    out = subprocess.run([sys.executable, "-c", "import shutil, pg_job_chaos.harness.postgres.pgbouncer as p;"
                          "shutil.which = lambda *_: None; import os; _a = os.access;"
                          "os.access = lambda f, m: False if 'pgbouncer' in str(f) else _a(f, m);"
                          "from pg_job_chaos.harness.cli.main import main; "
                          "raise SystemExit(main(['--pooler', 'pgbouncer']))"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert out.returncode == 3, out.stderr
    assert out.stderr.strip() == "pg-job-chaos: PgBouncer is not installed: apt-get install -y pgbouncer"


@pytest.mark.slow
def test_sigkill_of_the_harness_leaves_no_pgbouncer_behind():
    before = set(local.RUNS_DIR.glob("run-*-pgbouncer-*")) if local.RUNS_DIR.exists() else set()
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "--design", "lease", "--faults", "overrun",
                             "--pooler", "pgbouncer", "--examples", "50", "--time-scale", "0.5"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        run_dir = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and run_dir is None:
            mine = [d for d in set(local.RUNS_DIR.glob("run-*-pgbouncer-*")) - before
                    if d.name.startswith(f"run-{proc.pid}-")]
            if mine and (mine[0] / "pgbouncer.log").exists():
                run_dir = mine[0]
            time.sleep(0.2)
        assert run_dir is not None, "the harness did not start PgBouncer"
        mine = [p for p in _bouncers()
                if str(run_dir) in Path(f"/proc/{p}/cmdline").read_text().replace("\0", " ")]
        assert mine, "no PgBouncer process for the run"
        time.sleep(1.0)  # let the search get going: workers connected through it
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (run_dir.exists()
                                               or any(os.path.exists(f"/proc/{p}") for p in mine)):
            time.sleep(0.3)
        assert not any(os.path.exists(f"/proc/{p}") for p in mine), "PgBouncer still running"
        assert not run_dir.exists(), "PgBouncer's run directory left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)  # reaped: an unwaited Popen warns at collection, inside a later test


def test_parse():
    assert pgbouncer.parse("pgbouncer") == "pgbouncer:transaction"
    assert pgbouncer.parse("pgbouncer:session") == "pgbouncer:session"
    assert pgbouncer.parse("pgbouncer:transaction:1") == "pgbouncer:transaction:1"
    assert pgbouncer.parse(None) is None and pgbouncer.parse("none") is None
    for bad in ("pgbouncer:statement", "pgbouncer:session:0", "pgpool"):
        with pytest.raises(Exception, match="expected pgbouncer"):
            pgbouncer.parse(bad)


def test_experiments_that_measure_the_server_go_straight_to_it(pooled):
    result = run_experiment("rls-queue", pooled, quick=True, progress=lambda _m: None)
    assert "measured straight to the server" in result["note"]
    rows = {r["variant"]: r for r in run_experiment("reset-cost", pooled, quick=True,
                                                    progress=lambda _m: None)["rows"]}
    # Through transaction pooling only prepare_threshold=None is free of prepared-statement errors.
    assert rows["discard-all-unprepared"]["errors"] == [0, 0]
