"""The foundation: a throwaway PostgreSQL started as an unprivileged user, the article's data,
forced RLS against an ordinary role, the DSN back end, and nothing left behind."""

from __future__ import annotations

import hashlib
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from pg_job_chaos.core.errors import HarnessError
from pg_job_chaos.harness.postgres import dataset as db
from pg_job_chaos.harness.postgres import dsn as dsn_backend
from pg_job_chaos.harness.postgres import local, provision
from tests.conftest import ROOT, run_cli

# One process at a time with test_docker.py: the kill tests count every "run.py --design lease --faults
# overrun" process on the machine, and test_docker.py starts one.
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("harness-processes")]


def _real_uid(pid: int) -> int:
    """The real uid of a process, as the kernel has it (``Uid:`` real, effective, saved, fs)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_local_server_runs_as_an_unprivileged_user(database):
    assert "PostgreSQL" in database.server
    with psycopg.connect(database.admin_dsn) as conn:
        backend = conn.info.backend_pid  # a backend of our server, and its postmaster
        postmaster = _parent(backend)
        assert "postgres" in Path(f"/proc/{postmaster}/cmdline").read_text()
        uids = {_real_uid(backend), _real_uid(postmaster)}
        expected = pwd.getpwnam(local.run_as_user()).pw_uid if os.geteuid() == 0 else os.getuid()
        assert uids == {expected} and (os.geteuid() != 0 or expected != 0), uids
        assert conn.execute("select current_setting('is_superuser')").fetchone()[0] == "on"
        assert conn.execute("select count(*) from invoices").fetchone()[0] == db.INVOICES_TOTAL == 103_707


@pytest.mark.parametrize(("tenant", "expected"), [(None, 0), (1, 20_000), (2, 10_000), (3, 6_666), (100, 200)])
def test_worker_role_sees_only_its_tenant(database, tenant, expected):
    with psycopg.connect(database.worker_dsn) as conn:
        if tenant is not None:
            conn.execute("select set_config('app.tenant', %s, false)", (str(tenant),))
        assert conn.execute("select count(*) from invoices").fetchone()[0] == expected == (
            db.invoices_of(tenant) if tenant else 0)
        assert conn.execute("select count(*) from invoices where tenant_id <> %s", (tenant or 0,)).fetchone()[0] == 0


def test_worker_role_is_ordinary_and_cannot_lift_rls(database):
    with psycopg.connect(database.worker_dsn) as conn:
        row = conn.execute("select rolsuper, rolbypassrls from pg_roles where rolname = current_user").fetchone()
        assert row == (False, False)
        owner = conn.execute("select tableowner from pg_tables where tablename = 'invoices'").fetchone()[0]
        assert owner != database.worker_role
        for stmt in ("alter table invoices disable row level security",
                     "alter table invoices no force row level security",
                     "drop policy tenant_isolation on invoices"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt)
            conn.rollback()
        conn.execute("select set_config('app.tenant', '1', false)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("set role " + database.admin_dsn.split("user=")[1].split()[0])
        conn.rollback()
        # A forged tenant value only ever shows that tenant's rows.
        conn.execute("select set_config('app.tenant', '2', false)")
        assert conn.execute("select count(distinct tenant_id) from invoices").fetchone()[0] == 1


def test_jobs_table_has_no_tenant_policy(database):
    with psycopg.connect(database.worker_dsn) as conn:
        conn.execute("insert into jobs (id, tenant_id) values (999001, 5)")
        assert conn.execute("select count(*) from jobs where id = 999001").fetchone()[0] == 1
        conn.rollback()


def test_fast_reset_empties_the_queue_and_keeps_invoices(database):
    with psycopg.connect(database.admin_dsn, autocommit=True) as conn:
        conn.execute("insert into jobs (id) values (1), (2)")
        conn.execute("insert into job_runs (job_id, worker, attempt) values (1, 'w', 1)")
        seconds = db.reset(conn)
        assert conn.execute("select (select count(*) from jobs) + (select count(*) from job_runs)").fetchone()[0] == 0
        assert conn.execute("select count(*) from invoices").fetchone()[0] == db.INVOICES_TOTAL
        assert seconds < 5  # a sanity bound only; the figure is printed by `python run.py bench`


def _fingerprint(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select id, payload from precious order by id").fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def test_dsn_backend_touches_nothing_outside_its_database(database):
    server_dsn = dsn_backend.with_db(database.admin_dsn, dbname="postgres")
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute("drop database if exists precious_app")
        conn.execute("create database precious_app")
    other = dsn_backend.with_db(server_dsn, dbname="precious_app")
    with psycopg.connect(other) as conn:
        conn.execute("create table precious (id int primary key, payload text)")
        conn.execute("insert into precious select g, md5(g::text) from generate_series(1, 1000) g")
        conn.commit()
    before = _fingerprint(other)

    def databases_and_roles():
        with psycopg.connect(server_dsn) as conn:
            return (sorted(r[0] for r in conn.execute("select datname from pg_database")),
                    sorted(r[0] for r in conn.execute("select rolname from pg_roles")))

    outside_before = databases_and_roles()
    r = run_cli("--postgres", server_dsn, "--design", "lease",
                "--faults", "crash", "--examples", "1", "--time-scale", "0.2", "-q", timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert _fingerprint(other) == before
    assert databases_and_roles() == outside_before  # our database and role were dropped again
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute("drop database precious_app")


def test_unreachable_dsn_is_one_line_and_exit_3():
    r = run_cli("--postgres", "postgresql://nobody:x@127.0.0.1:1/nothing", "--faults", "crash", timeout=60)
    assert r.returncode == 3
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to PostgreSQL at 127.0.0.1:1" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_missing_binary_dir_is_one_line_and_exit_3(tmp_path):
    r = run_cli("--pg-bin", str(tmp_path / "nope"), "--faults", "crash", timeout=60)
    assert r.returncode == 3
    assert r.stderr.strip().count("\n") == 0 and "no PostgreSQL server binaries" in r.stderr
    with pytest.raises(HarnessError):
        with provision(pg_bin=str(tmp_path)):
            pass


def test_docker_without_engine_is_one_line_and_exit_3():
    from pg_job_chaos.harness.postgres import docker

    try:
        docker.client()
        pytest.skip("a Docker engine answers here; this test is for machines without one")
    except HarnessError:
        pass
    r = run_cli("--postgres", "docker", "--faults", "crash", timeout=120)
    assert r.returncode == 3 and "no Docker engine answers" in r.stderr and "Traceback" not in r.stderr


def _pids_of(run_dir: Path) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"postgres -D {run_dir}/data"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _harness_processes() -> list[str]:
    """run.py and its forked workers (a fork keeps the parent's command line)."""
    return subprocess.run(["pgrep", "-f", "run.py --design lease --faults overrun"], capture_output=True,
                          text=True).stdout.split()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killing_the_harness_leaves_nothing_behind(sig):
    before = set(local.RUNS_DIR.glob("run-*")) if local.RUNS_DIR.exists() else set()
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "--design", "lease", "--faults", "overrun",
                             "--examples", "50", "--time-scale", "0.5"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        run_dir = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and run_dir is None:
            for d in set(local.RUNS_DIR.glob("run-*")) - before:
                if d.name.startswith(f"run-{proc.pid}-") and _pids_of(d):
                    run_dir = d
            time.sleep(0.2)
        assert run_dir is not None, "the harness did not start its server"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_harness_processes()) < 2:  # run.py and a worker
            time.sleep(0.1)
        assert len(_harness_processes()) >= 2, "no worker was forked"
        os.kill(proc.pid, sig)
        proc.wait(30)
        if sig != signal.SIGKILL:  # it unwinds and cleans up itself, and says it was stopped
            assert proc.returncode in (128 + sig, 130)
        deadline = time.monotonic() + 70
        while time.monotonic() < deadline and (run_dir.exists() or _pids_of(run_dir)):
            time.sleep(0.5)
        assert not _pids_of(run_dir), "postgres still running after the harness was killed"
        assert not run_dir.exists(), "run directory left behind"
        assert _harness_processes() == [], "worker processes left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)  # reaped: an unwaited Popen warns at collection, inside a later test


def test_sweep_removes_directories_of_dead_owners(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "RUNS_DIR", tmp_path)
    dead = tmp_path / "run-999999-x"
    (dead / "data").mkdir(parents=True)
    (dead / "owner").write_text("999999 1\n")
    mine = tmp_path / "run-mine"
    mine.mkdir()
    (mine / "owner").write_text(f"{os.getpid()} {local.process_start_time(os.getpid())}\n")
    assert local.sweep() == [str(dead)]
    assert mine.exists() and not dead.exists()


def test_sql_files_resolve_names_at_import():
    from pg_job_chaos.core import sqlfile

    with pytest.raises(LookupError):
        sqlfile.load(db.__file__, "schema.sql", "no_such_query")
    assert "{worker}" in db.Q.create_worker_role and "{password}" in db.Q.create_worker_role
