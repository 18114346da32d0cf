"""The worker contract's Python client tracks the tenant setting under the job's own statements
(workers/clients/python/pgjc_tenant.py): a user's contract worker whose own connection keeps a
session-level tenant leaks it into the next system job's read, named on that statement; the same worker
setting it locally holds."""

from __future__ import annotations

import sys

import pytest

from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.core.statement_tenants import statement_tenants
from pg_job_chaos.properties import check
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

WORKER = '''
import sys
import time

sys.path.insert(0, {examples!r})
import pgjc_contract
import psycopg
import worker as reference  # examples/contract/worker.py: its describe, install and enqueue as they are

SCOPE = {scope!r}


def work():
    client = pgjc_contract.Client()
    client.watch_statements()
    lease, poll = client.seconds["lease"], client.seconds["poll"]
    with psycopg.connect(reference.URL, autocommit=True) as queue, psycopg.connect(reference.URL) as own:
        while client.may_dequeue():
            row = queue.execute(reference.SQL["claim"], {{"lease": lease}}).fetchone()
            if row is None:
                time.sleep(poll)
                continue
            job_id, args, attempts = row
            tenant = args.get("tenant")
            with own.transaction():  # the user's own tenant code, on the user's own connection
                if tenant is not None:
                    own.execute("select set_config('app.tenant', %s, %s)", [str(tenant), SCOPE == "local"])
                client.run_job(args, attempts,
                               work=lambda: own.execute("select count(*) from invoices").fetchone())
            queue.execute(reference.SQL["finish"], {{"id": job_id}})


if __name__ == "__main__":
    pgjc_contract.main({{"describe": reference.describe, "install": reference.install,
                        "enqueue": reference.enqueue, "work": work}})
'''


@pytest.mark.parametrize(("scope", "expected"), [("session", "violated"), ("local", "held")])
def test_the_python_clients_job_statements_are_judged(runner, tmp_path, scope, expected):
    path = tmp_path / f"worker_{scope}.py"
    path.write_text(WORKER.format(examples=str(ROOT / "examples" / "contract"), scope=scope))
    h = runner.run(Schedule(jobs=(JobSpec(1, tenant=1), JobSpec(2, tenant=None)), workers=1,
                            design="contract", time_scale=0.2,
                            design_options={"command": f"{sys.executable} {path}"}))
    # the job's own statements between its start and end (its queue's claim of the next job is not one)
    mine = [st for found in statement_tenants(h).values() for st in found]
    assert {(st.job, st.statement, st.value) for st in mine} == {
        (1, "select count(*) from invoices", "1"),
        (2, "select count(*) from invoices", "1" if scope == "session" else "")}, mine
    verdict = check(h, ["tenant-isolation"])["tenant-isolation"]
    assert verdict.status == expected, verdict.evidence
    if scope == "session":
        assert verdict.evidence == 'job 2 (no tenant) ran "select count(*) from invoices" as tenant 1'
