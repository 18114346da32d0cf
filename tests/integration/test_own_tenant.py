"""The user's own tenant code under test (examples/tenant_worker.py, workers/hosted/own_connection.py): the
body runs on the connection the worker's decorator prepared, observes it and changes nothing."""

from __future__ import annotations

import shutil

import pytest

from pg_job_chaos import ChaosSession, Schedule, Settings
from pg_job_chaos.core.schedule import JobSpec
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

PROBE = '''
from tenant_worker import TenantWorker, tenant_task, work_loop
from psycopg_pool import ConnectionPool
import psycopg
from pg_job_chaos.workers import hosted


class Probe(TenantWorker):
    """The example worker, which also records what the body left on its connection."""

    def run_worker(self, ctx):
        with ConnectionPool(ctx.worker_dsn, min_size=1, max_size=1, open=True) as pool, \\
                psycopg.connect(ctx.worker_dsn, autocommit=True) as queue:

            @tenant_task(pool, self.options.get("scope", "local"))
            def run(conn, args, attempt):
                before = conn.info.transaction_status.name
                hosted.run_job(ctx, args, attempt=attempt, conn=conn)
                marker = conn.execute("select current_setting('pgjc.last', true)").fetchone()[0]
                ctx.log.write("probe", job=args["job"], before=before, marker=marker)

            work_loop(queue, run, lease=ctx.lease, poll=ctx.poll, keep_going=ctx.may_dequeue)
'''


@pytest.fixture
def design_dir(tmp_path):
    shutil.copy(ROOT / "examples" / "tenant_worker.py", tmp_path / "tenant_worker.py")
    (tmp_path / "probe.py").write_text(PROBE)
    return tmp_path


@pytest.fixture
def runner(database):
    """A runner of this test's own: the tenant worker's setting changes the invoices' policy, and the
    runner puts it back when it closes, so the session's database is left as provisioned for the tests
    that check its row-level security (test_postgres.py)."""
    from pg_job_chaos.harness.runner import Runner

    with Runner(database) as r:
        yield r


def test_session_scoped_tenant_code_is_found_leaking_and_local_holds(runner, design_dir):
    session = ChaosSession(runner, Settings(out=design_dir / "out", root=design_dir, time_scale=0.5))
    design = f"{design_dir / 'tenant_worker.py'}:TenantWorker"
    # The small-scope pass decides it: tenant 1's job, then a system job on the same pooled connection.
    leaky = session.search(design=design, design_options={"scope": "session"}, faults="", examples=1, seed=1)
    assert leaky.violated == ["tenant-isolation"], leaky.explain()
    evidence = leaky.properties["tenant-isolation"].evidence
    assert "(no tenant) began as tenant 1 from its own worker's job 1 attempt 1 on server session" in evidence
    fine = session.search(design=design, design_options={"scope": "local"},
                          faults="raise", examples=1, seed=1)
    assert fine.status("tenant-isolation") == "held", fine.explain()


def test_the_body_sets_nothing_on_the_workers_connection(runner, design_dir):
    session = ChaosSession(runner, Settings(out=design_dir / "out", root=design_dir, time_scale=0.5))
    schedule = Schedule(jobs=(JobSpec(1, tenant=1), JobSpec(2, tenant=None), JobSpec(3, tenant=3)), workers=1,
                        design=f"{design_dir / 'probe.py'}:Probe", design_options={"scope": "session"},
                        time_scale=0.5)
    result = session.run(schedule, save=False)
    probes = [r for r in result.history.records if r["event"] == "probe"]
    assert [p["job"] for p in probes] == [1, 2, 3]
    assert all(p["marker"] is None for p in probes), probes  # no session marker of the harness's
    seen = {r["job"]: r for r in result.history.records if r["event"] == "tenant-seen"}
    assert (seen[1]["value"], seen[2]["value"], seen[3]["value"]) == ("1", "1", "3")  # job 2 got job 1's
    assert seen[1]["setting"] == "app.current_tenant" and seen[3]["visible"] == 20000 // 3
    assert result.status("tenant-isolation") == "violated"
