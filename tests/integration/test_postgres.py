"""The foundation: a throwaway PostgreSQL started as an unprivileged user, the article's data,
forced RLS against an ordinary role, the DSN back end, and nothing left behind."""

from __future__ import annotations

import dataclasses
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
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.postgres import dataset as db
from pg_job_chaos.harness.postgres import dsn as dsn_backend
from pg_job_chaos.harness.postgres import local, provision
from pg_job_chaos.harness.runner import RUNS_BASE
from pg_job_chaos.workers import load_design
from tests.conftest import ROOT, run_cli

# One xdist worker for this module and test_docker.py, as the suite's times were measured. The kill tests
# no longer need it: they tell their harness's processes by a mark in its environment, not by a command
# line that another test's harness shares (test_docker.py's, test_pgbouncer.py's, which is not grouped).
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


def test_local_server_stores_one_scram_iteration_and_still_checks_the_password(database):
    """The harness's own server (16+): verifiers of one PBKDF2 iteration, so a login is cheap; a
    wrong password is still refused."""
    with psycopg.connect(database.admin_dsn) as conn:
        if conn.info.server_version < 160000 or not database.server.startswith("local "):
            pytest.skip("the harness's own server of PostgreSQL 16+ only")
        admin = conn.info.user
        stored = dict(conn.execute("select rolname, rolpassword from pg_authid where rolname in (%s, %s)",
                                   (admin, database.worker_role)).fetchall())
    assert sorted(stored) == sorted({admin, database.worker_role})
    assert {v.split("$")[1].split(":")[0] for v in stored.values()} == {"1"}, stored
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(dsn_backend.with_db(database.worker_dsn, password="not-it")).close()


@pytest.mark.parametrize(("tenant", "expected"),
                         [(None, 0), (1, 20_000), (2, 10_000), (3, 6_666), (100, 200)])
def test_worker_role_sees_only_its_tenant(database, tenant, expected):
    with psycopg.connect(database.worker_dsn) as conn:
        if tenant is not None:
            conn.execute("select set_config('app.tenant', %s, false)", (str(tenant),))
        assert conn.execute("select count(*) from invoices").fetchone()[0] == expected == (
            db.invoices_of(tenant) if tenant else 0)
        assert conn.execute("select count(*) from invoices where tenant_id <> %s",
                            (tenant or 0,)).fetchone()[0] == 0


def test_worker_role_is_ordinary_and_cannot_lift_rls(database):
    with psycopg.connect(database.worker_dsn) as conn:
        row = conn.execute(
            "select rolsuper, rolbypassrls from pg_roles where rolname = current_user").fetchone()
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
        db.reset(conn)  # the session's database: an earlier test on it may have left jobs
        conn.execute("insert into jobs (id) values (1), (2)")
        conn.execute("insert into job_runs (job_id, worker, attempt) values (1, 'w', 1)")
        seconds = db.reset(conn)
        assert conn.execute(
            "select (select count(*) from jobs) + (select count(*) from job_runs)").fetchone()[0] == 0
        assert conn.execute("select count(*) from invoices").fetchone()[0] == db.INVOICES_TOTAL
        assert seconds < 5  # a sanity bound only; the figure is printed by `python run.py bench`


def test_reset_restarts_the_counters_and_truncates_after_many_rows(database):
    with psycopg.connect(database.admin_dsn, autocommit=True) as conn:
        db.reset(conn)
        conn.execute("insert into job_runs (job_id, worker, attempt) values (1, 'w', 1), (2, 'w', 1)")
        conn.execute("insert into jobs (id) values (1)")  # the trigger logs it in job_transitions
        db.reset(conn)
        conn.execute("insert into jobs (id) values (7)")
        assert conn.execute("insert into job_runs (job_id, worker, attempt) values (7, 'w', 1) returning id"
                            ).fetchone()[0] == 1  # RESTART IDENTITY's counters, by setval
        assert conn.execute("select seq from pgjc.job_transitions").fetchall() == [(1,)]
        key = (conn.info.host, conn.info.port, conn.info.dbname)
        conn.execute("insert into jobs (id) select generate_series(100, 100 + %s)", (db.DEAD_ROWS,))
        db.reset(conn)  # more rows deleted than DEAD_ROWS: truncated in the same transaction
        assert db._dead[key] == 0
        assert conn.execute("select pg_relation_size('pgjc.jobs')").fetchone()[0] == 0  # new, empty file


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


MARK_VAR = "PGJC_TEST_KILLED_HARNESS"  # in the environment of the harness a kill test starts


def _marked(mark: str) -> dict[int, str]:
    """Every live process whose environment holds ``MARK_VAR=mark``, with its command line: the
    harness a kill test started and whatever it started (its slots and workers are forks, the
    janitor and the servers inherit its environment); another test's harness, however alike its
    command line, never. Zombies have no environment left and are not listed."""
    want = f"{MARK_VAR}={mark}".encode()
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if want in (d / "environ").read_bytes().split(b"\0"):
                cmdline = (d / "cmdline").read_bytes()
                found[int(d.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
    return found


def _workers(mark: str, harness: int) -> list[int]:
    """The harness's worker processes (forks of it, each in a process group of its own), without
    the harness itself, its slot processes (in its group) and the janitor (its own session)."""
    workers = []
    for pid, cmdline in _marked(mark).items():
        try:
            if pid != harness and "run.py" in cmdline and os.getpgid(pid) == pid:
                workers.append(pid)
        except ProcessLookupError:
            continue
    return workers


def _wait_for(condition, seconds: float, step: float = 0.1):
    """Poll *condition* until it is truthy or *seconds* have passed; its last value."""
    deadline = time.monotonic() + seconds
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(step)
    return value


@pytest.mark.slow
def _interruptible() -> None:
    """The harness's SIGINT as a terminal gives it. Hazard: under a shell's background job (`.ci/run &`)
    SIGINT is inherited ignored, and Python then installs no handler: the Ctrl-C never comes."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killing_the_harness_leaves_nothing_behind(sig, tmp_path):
    """Killed while its workers run, the harness leaves no process, server or run directory. Its
    processes are told by a mark in their environment, not by a command line (the PgBouncer kill
    test starts a harness with the same one). The bounds are generous for a loaded 2-core
    machine (other searches beside it): each wait ends as soon as its condition holds."""
    mark = f"{os.getpid()}-{sig.name}-{time.monotonic_ns()}"
    before = set(local.RUNS_DIR.glob("run-*")) if local.RUNS_DIR.exists() else set()
    log = tmp_path / "harness.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "--design", "lease", "--faults",
                                 "overrun", "--examples", "50", "--time-scale", "0.5"],
                                stdout=subprocess.DEVNULL, stderr=out, stdin=subprocess.DEVNULL, cwd=ROOT,
                                env=dict(os.environ, **{MARK_VAR: mark}), preexec_fn=_interruptible)

    def said() -> str:
        return f"; exit {proc.poll()}; its stderr ends: {log.read_text(errors='replace')[-2000:]!r}"

    try:
        def server():
            if proc.poll() is not None:
                return "exited"
            mine = set(local.RUNS_DIR.glob(f"run-{proc.pid}-*")) - before
            return next((d for d in mine if _pids_of(d)), None)

        run_dir = _wait_for(server, 180, 0.2)
        assert isinstance(run_dir, Path), "the harness did not start its server" + said()
        workers = _wait_for(lambda: proc.poll() is not None or _workers(mark, proc.pid), 180, 0.05)
        assert proc.poll() is None and workers, "no worker was forked" + said()
        started = time.monotonic()
        os.kill(proc.pid, sig)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the harness did not exit within 120 s of {signal.Signals(sig).name}" + said())
        exited = time.monotonic() - started
        if sig != signal.SIGKILL:  # it unwinds and cleans up itself, and says it was stopped
            assert proc.returncode in (128 + sig, 130), said()
            assert "interrupted; everything it started has been removed" in log.read_text(), said()

        def runs() -> list[Path]:  # the parallel slots' run directories (their logs), made by this harness
            return list(RUNS_BASE.glob(f"slot-{proc.pid}-*"))

        left = _wait_for(lambda: not (run_dir.exists() or _pids_of(run_dir) or _marked(mark) or runs()),
                         120, 0.2)
        print(f"{signal.Signals(sig).name}: workers {workers} at the kill; harness gone after "
              f"{exited:.1f} s, everything after {time.monotonic() - started:.1f} s")
        assert left, (f"left behind after {time.monotonic() - started:.0f} s: postgres {_pids_of(run_dir)}, "
                      f"run directory {run_dir.exists()}, processes {_marked(mark)}, slot runs {runs()}"
                      + said())
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


def test_a_runner_leaves_the_invoices_policy_as_it_found_it(database):
    """A design with a tenant setting of its own makes the invoices' policy read it for its runs; the
    runner puts the policy back when it closes, so the next user of the database sees app.tenant."""
    from pg_job_chaos.harness.runner import Runner

    own = dataclasses.replace(load_design("lease"), tenant_setting="app.current_tenant")
    with Runner(database) as runner:
        runner.prepare(Schedule(jobs=(JobSpec(1, tenant=1),), design="lease"), own)
        with psycopg.connect(database.worker_dsn) as conn:  # the design's setting, for its runs
            conn.execute("select set_config('app.current_tenant', '1', false)")
            assert conn.execute("select count(*) from invoices").fetchone()[0] == 20_000
    with psycopg.connect(database.worker_dsn) as conn:
        conn.execute("select set_config('app.tenant', '1', false)")
        assert conn.execute("select count(*) from invoices").fetchone()[0] == 20_000
