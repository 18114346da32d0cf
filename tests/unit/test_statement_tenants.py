"""tenant-isolation on a job's own statements (core/statement_tenants.py, properties/tenant.py), on
hand-written histories: a statement as another tenant is a leak whatever table it read; a system job
as any tenant too; one outside the execution's start and end is not the job's; an unknown setting is
unknown, never held."""

from __future__ import annotations

from pg_job_chaos import properties
from pg_job_chaos.core.statement_tenants import statement_tenants
from tests.unit.test_properties import execution, history, job, rec, run_row

NAME = "tenant-isolation"


def stmt(t, job_id, value, *, text="select count(*) from documents", known=True, attempt=1, worker="w1.0"):
    return rec(t, worker, "tenant-statement", job_id, attempt, setting="app.tenant", statement=text,
               value=value, known=known)


def judge(*records):
    h = history(records=[r for group in records for r in (group if isinstance(group, list) else [group])],
                jobs=[job(1), job(2, tenant=4)], runs=[run_row(1, 1), run_row(2, 1)])
    return properties.check(h, [NAME])[NAME], h


def test_a_users_read_as_another_tenant_is_found_whatever_it_read():
    # job 2's own read on a pooled connection tenant 1 left: nothing else of the job shows it
    verdict, _ = judge(execution("w1.0", 1, 1, 1.0, 2.0), execution("w1.0", 2, 1, 3.0, 4.0, tenant=4),
                       stmt(3.5, 2, "1"))
    assert verdict.status == "violated" and verdict.jobs == (2,)
    assert verdict.evidence == 'job 2 (tenant 4) ran "select count(*) from documents" as tenant 1'


def test_a_system_job_as_any_tenant_is_a_leak_and_its_own_tenant_or_none_is_not():
    verdict, _ = judge(execution("w1.0", 1, 1, 1.0, 2.0, tenant=None, visible=0),
                       execution("w1.0", 2, 1, 3.0, 4.0, tenant=4), stmt(1.5, 1, "1"), stmt(3.5, 2, "4"),
                       stmt(3.6, 2, ""))
    assert verdict.status == "violated" and verdict.jobs == (1,)
    assert 'job 1 (no tenant) ran "select count(*) from documents" as tenant 1' in verdict.evidence


def test_a_statement_after_the_jobs_end_is_not_the_jobs():
    # the wrapper keeps the thread's last job as current: its next claim, at t=2.5, is logged as job 1's
    verdict, h = judge(execution("w1.0", 1, 1, 1.0, 2.0), execution("w1.0", 2, 1, 3.0, 4.0, tenant=4),
                       stmt(2.5, 1, "1", text="update pool_jobs set status = 'running'"))
    assert verdict.status == "held", verdict
    assert statement_tenants(h) == {}


def test_a_setting_that_cannot_be_known_is_unknown_never_held():
    verdict, _ = judge(execution("w1.0", 1, 1, 1.0, 2.0), execution("w1.0", 2, 1, 3.0, 4.0, tenant=4),
                       stmt(3.5, 2, None, known=False))
    assert verdict.status == "unknown"
    assert 'job 2 ran "select count(*) from documents" with a tenant setting that cannot be known' \
        in verdict.evidence
    # ... unless a leak is found: then violated
    verdict, _ = judge(execution("w1.0", 1, 1, 1.0, 2.0), execution("w1.0", 2, 1, 3.0, 4.0, tenant=4),
                       stmt(3.5, 2, None, known=False), stmt(1.5, 1, "3"))
    assert verdict.status == "violated" and verdict.jobs == (1,)


def test_the_evidence_quotes_a_few_statements_and_counts_the_rest():
    verdict, _ = judge(execution("w1.0", 1, 1, 1.0, 2.0), execution("w1.0", 2, 1, 3.0, 4.0, tenant=4),
                       *[stmt(3.1 + i / 10, 2, "1", text=f"select {i}") for i in range(5)])
    assert verdict.evidence.count(" as tenant 1") == 3 and "2 more statements as another tenant" in \
        verdict.evidence
