"""tenant-isolation on the worker's own tenant code (workers/hosted/own_connection.py) and on complete
reads: a job must begin with exactly its tenant and see all of its tenant's rows (no database)."""

from __future__ import annotations

from pg_job_chaos.properties import HELD, VIOLATED
from tests.unit.test_properties import execution, one, rec, sane


def own(worker, job, attempt, start, end, *, tenant, seen, backend=9000, visible=0, foreign=0) -> list[dict]:
    """One execution on the worker's own connection: the body observed *seen* as it began."""
    return [rec(start, worker, "started", job, attempt, tenant=tenant, own_tenant=True),
            rec(start + 0.01, worker, "tenant-seen", job, attempt, tenant=tenant,
                setting="app.current_tenant", value=seen, backend=backend, visible=visible, foreign=foreign),
            rec(start + 0.02, worker, "effect", job, attempt), rec(end, worker, "finished", job, attempt)]


EXPECTED = {"1": 20000, "2": 10000}


def test_own_tenant_code_that_leaves_the_tenant_on_the_session_is_named_with_whose_job_left_it():
    h = sane(records=[*own("w1.0", 1, 1, 1.0, 2.0, tenant=1, seen="1", visible=20000),
                      *own("w1.0", 2, 1, 2.0, 3.0, tenant=None, seen="1", visible=20000, foreign=20000)],
             expected_rows=EXPECTED)
    result = one("tenant-isolation", h)
    assert (result.status, result.jobs) == (VIOLATED, (2,))
    assert result.evidence == ("job 2 (no tenant) began as tenant 1 from its own worker's job 1 attempt 1 on "
                               "server session 9000 and saw 20000 invoices of another tenant")


def test_a_tenant_job_that_begins_with_its_own_tenant_is_not_a_leak():
    # The worker's code set the job's tenant before the body began: that is what it must see.
    h = sane(records=[*own("w1.0", 1, 1, 1.0, 2.0, tenant=1, seen="1", visible=20000),
                      *own("w1.0", 2, 1, 2.0, 3.0, tenant=2, seen="2", visible=10000),
                      *own("w1.0", 3, 1, 3.0, 4.0, tenant=None, seen="", visible=0)],
             expected_rows=EXPECTED)
    result = one("tenant-isolation", h)
    assert result.status == HELD, result.evidence
    assert "all of its own" in result.evidence


def test_reads_without_the_jobs_tenant_see_nothing_and_are_a_violation():
    h = sane(records=own("w1.0", 2, 1, 1.0, 2.0, tenant=2, seen="", visible=0), expected_rows=EXPECTED)
    result = one("tenant-isolation", h)
    assert (result.status, result.jobs) == (VIOLATED, (2,))
    assert result.evidence == ("job 2 (tenant 2) began with no tenant set by the worker's tenant code and "
                               "read 0 of its 10,000 invoices: it ran without its tenant")


def test_the_harness_body_reading_fewer_rows_than_its_tenant_owns_is_a_violation():
    h = sane(records=execution("w1.0", 1, 1, 1.0, 2.0, tenant=2, visible=0), expected_rows=EXPECTED)
    result = one("tenant-isolation", h)
    assert result.status == VIOLATED
    assert result.evidence == "job 1 (tenant 2) read 0 of its 10,000 invoices: it ran without its tenant"
    # Without the data set's counts (a history saved before they were recorded) only leaks decide.
    assert one("tenant-isolation",
               sane(records=execution("w1.0", 1, 1, 1.0, 2.0, tenant=2, visible=0))).status == HELD


def test_a_wrong_tenant_is_named_even_when_the_server_session_has_no_earlier_job():
    h = sane(records=own("w1.0", 1, 1, 1.0, 2.0, tenant=1, seen="7", visible=2857, foreign=2857),
             expected_rows=EXPECTED)
    assert one("tenant-isolation", h).evidence.startswith("job 1 (tenant 1) began as tenant 7 and saw 2857")
