"""A user's tables named like the harness's (``jobs``, ``job_runs``, ``invoices`` in ``public``): the
harness keeps its own in its schema ``pgjc`` and never reads, writes or empties the user's; what still
clashes is a usage error (exit 2) naming the table and the fix, never exit 3."""

from __future__ import annotations

import json
import secrets

import psycopg
import pytest
from psycopg import sql

from pg_job_chaos import properties
from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.postgres import dataset as db
from pg_job_chaos.harness.postgres import dsn as dsn_backend
from tests.conftest import run_cli

pytestmark = pytest.mark.integration

# In the shape of examples/my_worker.py, on a queue table called jobs with columns of its own (kind), and
# tables job_runs and invoices of its own too; its reset deletes its work rows only, never its kept row.
OWN_JOBS = '''
import time

from psycopg import sql

from pg_job_chaos.workers import hosted

SCHEMA = """
create table if not exists jobs (
    id           bigserial primary key,
    kind         text not null,
    args         jsonb not null,
    status       text not null default 'queued',
    attempts     int not null default 0,
    max_attempts int not null,
    last_error   text,
    claimed_at   timestamptz
);
create table if not exists job_runs (id bigserial primary key, note text not null);
create table if not exists invoices (id bigserial primary key, secret text not null);
"""
CLAIM = """
update jobs set status = 'running', attempts = attempts + 1, claimed_at = now()
 where id = (select id from jobs where kind = 'work' and status = 'queued' order by id limit 1
             for update skip locked)
returning id, args, attempts
"""


class OwnJobs(hosted.HostedDesign):
    name = "own-jobs"

    def install(self, conn, *, worker_role):
        conn.execute(SCHEMA)
        if conn.execute("select count(*) from jobs where kind = 'keep'").fetchone()[0] == 0:
            conn.execute("insert into jobs (kind, args, max_attempts, status) "
                         "values ('keep', '{}', 1, 'done')")
            conn.execute("insert into job_runs (note) values ('mine')")
            conn.execute("insert into invoices (secret) values ('mine')")
        conn.execute(sql.SQL("grant select, update on jobs to {}").format(sql.Identifier(worker_role)))

    def reset(self, conn):
        conn.execute("delete from jobs where kind = 'work'")

    def enqueue(self, conn, jobs, *, max_attempts):
        for job in jobs:
            args = hosted.Jsonb(hosted.job_args(job))
            (my_id,) = conn.execute("insert into jobs (kind, args, max_attempts) values ('work', %s, %s) "
                                    "returning id", [args, max_attempts]).fetchone()
            hosted.record_ids(conn, [(job.id, my_id)])

    def pending(self, conn):
        return conn.execute("select count(*) from jobs where kind = 'work' and (status = 'queued' or "
                            "(status = 'running' and claimed_at > now() - make_interval(secs => %s)))",
                            [self.lease]).fetchone()[0]

    def final_states(self, conn):
        ids = hosted.schedule_ids(conn)
        states = {"queued": "queued", "running": "running", "done": "done", "failed": "dead"}
        return [{"id": ids[str(i)], "tenant_id": args["tenant"], "status": states.get(status, status),
                 "attempts": attempts, "last_error": error, "lease_expired": None}
                for i, args, status, attempts, error in conn.execute(
                    "select id, args, status, attempts, last_error from jobs where kind = 'work' "
                    "order by id")]

    def run_worker(self, ctx):
        import psycopg

        with psycopg.connect(ctx.worker_dsn, autocommit=True) as conn:
            while ctx.may_dequeue():
                row = conn.execute(CLAIM).fetchone()
                if row is None:
                    time.sleep(ctx.poll)
                    continue
                my_id, args, attempts = row
                try:
                    hosted.run_job(ctx, args, attempt=attempts)
                except Exception as exc:
                    conn.execute("update jobs set last_error = %s, status = case when attempts >= "
                                 "max_attempts then 'failed' else 'queued' end where id = %s",
                                 [str(exc), my_id])
                else:
                    conn.execute("update jobs set status = 'done' where id = %s", [my_id])
'''

# A design written for a jobs table it never creates (its migrations are elsewhere): its install reaches
# the harness's table through the search_path.
EXPECTS_ITS_OWN = '''
from own_jobs import OwnJobs


class ExpectsItsOwn(OwnJobs):
    def install(self, conn, *, worker_role):
        conn.execute("create index if not exists jobs_kind on jobs (kind)")
'''

TAKES_OUR_SCHEMA = '''
from own_jobs import OwnJobs


class TakesOurSchema(OwnJobs):
    def install(self, conn, *, worker_role):
        conn.execute("create schema pgjc")
'''

# Written against the old layout, when the harness's tables were in public.
NAMES_THE_OLD_PLACE = '''
from own_jobs import OwnJobs


class NamesTheOldPlace(OwnJobs):
    def install(self, conn, *, worker_role):
        conn.execute("select count(*) from public.job_map")
'''


@pytest.fixture
def design_dir(tmp_path):
    (tmp_path / "own_jobs.py").write_text(OWN_JOBS)
    (tmp_path / "expects.py").write_text(EXPECTS_ITS_OWN)
    (tmp_path / "takes.py").write_text(TAKES_OUR_SCHEMA)
    (tmp_path / "old.py").write_text(NAMES_THE_OLD_PLACE)
    return tmp_path


@pytest.fixture
def own_runner(database):
    """A runner of this test's own on the session's database; the user's tables are dropped afterwards
    (the other tests' built-in designs name jobs bare and would refuse to run beside them)."""
    from pg_job_chaos.harness.runner import Runner

    try:
        with Runner(database) as r:
            yield r
    finally:
        with psycopg.connect(database.admin_dsn, autocommit=True) as conn:
            conn.execute("drop table if exists public.jobs, public.job_runs, public.invoices")


def test_a_users_own_jobs_table_runs_fault_free_and_under_crash(design_dir):
    spec = f"{design_dir / 'own_jobs.py'}:OwnJobs"
    r = run_cli("search", "--design", spec, "--examples", "1", "--seed", "1", "--json",
                str(design_dir / "free.json"), "--out", str(design_dir / "out"), timeout=300, cwd=design_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    props = json.loads((design_dir / "free.json").read_text())["properties"]
    # no accepted_finishes, no lease_seconds (as the new-design template): not judged, never held
    # its own jobs table: the harness's status log has nothing of it, so success-final is not judged either
    assert {props.pop(n)["status"] for n in ("library-one-finish", "horizon", "success-final")} == {"unknown"}
    assert {p["status"] for p in props.values()} == {"held"}, props
    # Like examples/my_worker.py, nothing looks at a job a dead worker left running: terminal-states.
    r = run_cli("search", "--design", spec, "--faults", "crash", "--examples", "2", "--seed", "1", "--json",
                str(design_dir / "crash.json"), "--out", str(design_dir / "out"), timeout=300, cwd=design_dir)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    props = json.loads((design_dir / "crash.json").read_text())["properties"]
    assert props["terminal-states"]["status"] == "violated"


def test_the_harness_leaves_the_users_tables_alone(own_runner, design_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(design_dir))
    spec = f"{design_dir / 'own_jobs.py'}:OwnJobs"
    schedule = Schedule(jobs=(JobSpec(1, tenant=1), JobSpec(2, tenant=2), JobSpec(3, tenant=None)),
                        design=spec, workers=2, time_scale=0.5)
    for _ in range(2):  # between the two runs the harness resets its tables, the design its own
        h = own_runner.run(schedule)
        assert {j["status"] for j in h.jobs} == {"done"} and len(h.runs) == 3, h.jobs
        assert properties.check(h)["tenant-isolation"].status == "held"
    conn = own_runner.admin
    # The user's: its kept row and its second run's three jobs (its own reset deleted the first run's).
    assert conn.execute("select kind, count(*) from public.jobs group by kind order by kind").fetchall() == [
        ("keep", 1), ("work", 3)]
    assert conn.execute("select note from public.job_runs").fetchall() == [("mine",)]
    assert conn.execute("select secret from public.invoices").fetchall() == [("mine",)]
    # The harness's: the body's rows in its own job_runs, and its jobs untouched by a hosted design.
    assert conn.execute("select count(*) from pgjc.job_runs").fetchone()[0] == 3
    assert conn.execute("select count(*) from pgjc.jobs").fetchone()[0] == 0
    assert conn.execute("select count(*) from pgjc.invoices").fetchone()[0] == db.INVOICES_TOTAL
    # A built-in design names jobs bare: beside the user's public.jobs it would claim from that table.
    with pytest.raises(UsageError, match=r"names the harness's table jobs bare .* public\.jobs"):
        own_runner.run(schedule.replace(design="lease"))
    assert conn.execute("select count(*) from public.jobs").fetchone()[0] == 4


def test_a_design_that_reaches_the_harnesss_tables_is_a_usage_error(own_runner, design_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(design_dir))
    schedule = Schedule(jobs=(JobSpec(1, tenant=1),), workers=1, time_scale=0.5)
    with pytest.raises(UsageError, match=r"install failed on the harness's schema pgjc: .*already exists"):
        own_runner.prepare(schedule.replace(design=f"{design_dir / 'takes.py'}:TakesOurSchema"))
    with pytest.raises(UsageError, match=r'install failed: column "kind" does not exist\. If the statement '
                                         r"names tenants or invoices or jobs .*create table if not exists "
                                         r"public\.NAME"):
        own_runner.prepare(schedule.replace(design=f"{design_dir / 'expects.py'}:ExpectsItsOwn"))
    with pytest.raises(UsageError, match=r'install failed: relation "public\.job_map" does not exist\. The '
                                         r"harness's tables are no longer in public but in its schema pgjc: "
                                         r"name it pgjc\.job_map"):
        own_runner.prepare(schedule.replace(design=f"{design_dir / 'old.py'}:NamesTheOldPlace"))
    # From the command line: exit 2, one line, no traceback.
    r = run_cli("search", "--design", f"{design_dir / 'expects.py'}:ExpectsItsOwn", "--examples", "1",
                timeout=120, cwd=design_dir)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and 'column "kind" does not exist' in r.stderr, r.stderr


def test_a_schema_pgjc_already_there_is_a_usage_error(database):
    """Under --postgres DSN the database is a copy of the server's template1: one that carries a schema
    pgjc is named, with the fix."""
    name = f"pgjc_clash_{secrets.token_hex(3)}"
    server = dsn_backend.with_db(database.admin_dsn, dbname="postgres")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        dsn = dsn_backend.with_db(database.admin_dsn, dbname=name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create schema pgjc")
        with pytest.raises(UsageError, match=r"already has a schema pgjc .* template1: drop schema pgjc"):
            db.install(dsn, database=name, worker_role=database.worker_role)
    finally:
        dsn_backend.drop_database(server, name, None)
