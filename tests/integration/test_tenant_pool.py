"""A user's worker with a pool of two connections, its own session-level tenant helper, its own queue
table ``jobs`` in ``public`` and its own RLS ``documents`` table (examples/tenant_pool_worker.py, copied
to a directory of its own), run unchanged beside the harness's ``pgjc.jobs``: the leak
reaches only the job that gets the first job's connection back -- the third -- and the small-scope
pass finds it, named on the user's own statement; the helper switched to set_config(.., true) holds
on the same seed."""

from __future__ import annotations

import shutil

import psycopg
import pytest

from pg_job_chaos.faults import parse_faults
from pg_job_chaos.harness.engine.search import search
from pg_job_chaos.workers import load_design
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

SCALE = 0.25


@pytest.fixture
def runner(database):
    """A runner of this test's own (the design's tenant setting changes the invoices' policy; the runner
    puts it back when it closes: see test_own_tenant.py). The user's tables are dropped afterwards: a
    built-in design refuses to run where a ``public.jobs`` hides its queue (test_own_tables.py)."""
    from pg_job_chaos.harness.runner import Runner

    try:
        with Runner(database) as r:
            yield r
    finally:
        with psycopg.connect(database.admin_dsn, autocommit=True) as conn:
            conn.execute("drop table if exists public.jobs, public.documents")


@pytest.fixture
def design(tmp_path):
    shutil.copy(ROOT / "examples" / "tenant_pool_worker.py", tmp_path / "tenant_pool_worker.py")
    return f"{tmp_path / 'tenant_pool_worker.py'}:PoolWorker"


def _search(runner, design, scope):
    return search(runner.run, faults=parse_faults(""), design=load_design(design, {"scope": scope}),
                  tenant_mode="local", examples=1, seed=1, time_scale=SCALE)


def test_a_session_helper_leaks_through_a_pool_of_two_and_local_holds(runner, design):
    leaky = _search(runner, design, "session")
    shape = next(r for r in leaky.runs if r.label == "no fault; three jobs, one worker")  # small-scope
    verdict = shape.results["tenant-isolation"]
    assert verdict.status == "violated", verdict
    # the third job got job 1's connection back (the second got the pool's other one) ...
    assert 'job 3 (no tenant) ' in verdict.evidence, verdict.evidence
    assert 'ran "select count(*) from documents" as tenant 1' in verdict.evidence, verdict.evidence
    assert "job 2 (no tenant)" not in verdict.evidence, verdict.evidence
    with psycopg.connect(runner.database.admin_dsn) as conn:  # the user's jobs are its own, in public
        kinds = dict(conn.execute("select table_schema, count(*) from information_schema.columns "
                                  "where table_name = 'jobs' and column_name = 'args' group by 1"))
    assert kinds.get("public") == 1 and "pgjc" not in kinds, kinds  # (awa keeps an awa.jobs of its own)
    fine = _search(runner, design, "local")
    statuses = {r.label or f"example {i}": r.results["tenant-isolation"].status
                for i, r in enumerate(fine.runs)}
    assert set(statuses.values()) == {"held"}, statuses
    held = next(r for r in fine.runs if r.label == "no fault; three jobs, one worker")
    assert "statements of their own ran as another tenant" in held.results["tenant-isolation"].evidence
