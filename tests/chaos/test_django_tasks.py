"""django-tasks-db (the real library, adapters/django_tasks.py: django-tasks-db 0.13.0 on Django 5.2.19 and
the django-tasks 0.12.0 backport) under the harness: fault-free, a transient raise, a crash and an
overrun, each asserting what the library's own code implies (the installed package's lines):

- django_tasks_db/management/commands/db_worker.py:110-123: the loop fetches READY rows only
  (models.py:109-117), ``select_for_update(skip_locked=True)`` (models.py:131-135), and claims one
  (models.py:256-263: RUNNING, one more entry in ``worker_ids``);
- db_worker.py:190-191: a task that raises is ``set_failed`` (models.py:283-299): FAILED, no retry
  (neither the backend nor the Task API has a retry setting);
- db_worker.py:116-123: the claim is one transaction of two statements, the SELECT ... FOR UPDATE SKIP
  LOCKED (which takes an xid for the row lock) and the claim's UPDATE (models.py:256-263): a worker
  that stalls between them holds the xmin horizon back for as long as it stalls;
- nothing resets a RUNNING row: no heartbeat, no stale-task recovery anywhere in the package, so the
  row of a worker that died mid-task stays RUNNING for ever, and a live task is never taken back.
"""

from __future__ import annotations

import pytest

pytest.importorskip("django_tasks_db",
                    reason="django-tasks-db is not installed (pip install -e '.[libraries]')")

from pg_job_chaos.adapters.django_tasks import DjangoTasks  # noqa: E402
from pg_job_chaos.core import overlap  # noqa: E402
from pg_job_chaos.core.schedule import Event, JobSpec  # noqa: E402
from tests.hosted_runs import run_hosted, violated  # noqa: E402

pytestmark = [pytest.mark.chaos]

DESIGN = "django-tasks-db"
SCALE = 0.5  # the poll (db_worker --interval, documented 1 s) at 50 ms; nothing in the library needs more

CORRECT = ("tenant-isolation", "attempts-counted", "done-means-committed", "library-one-finish")


def _run(runner, jobs, **kw):
    return run_hosted(runner, DESIGN, SCALE, jobs, **kw)


def _row(runner, job: int) -> tuple:
    """The library's own row of a schedule job (status, worker_ids, exception class), before the """ \
        """next reset."""
    return runner.admin.execute(
        "select t.status, t.worker_ids, t.exception_class_path from django_tasks_database_dbtaskresult t "
        "join job_map m on m.library_id = t.id::text where m.job_id = %s", [job]).fetchone()


def test_fault_free_every_job_done_once(runner):
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=0.01) for i in range(1, 7)])
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)] * 6
    assert sorted(x["job_id"] for x in h.runs) == list(range(1, 7))
    assert not violated(r), {n: r[n].evidence for n in violated(r)}
    for name in (*CORRECT, "single-commit", "at-most-once-effects", "no-overlap", "bounded-attempts",
                 "progress", "terminal-states"):
        assert r[name].status == "held", (name, r[name].evidence)


def test_a_transient_raise_is_failed_for_good(runner):
    """db_worker.py:190-191: the task raised once (it would succeed the second time); the library
    saves FAILED with the exception's class (models.py:283-299) and never runs it again."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="raise", strikes=1)], workers=1)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("dead", 1)]
    (only,) = h.executions()
    assert only.attempt == 1  # TaskContext.attempt: one claim in worker_ids
    status, workers, error = _row(runner, 1)
    assert status == "FAILED" and len(workers) == 1 and error
    assert r["transient-recovers"].status == "violated", r["transient-recovers"].evidence
    for name in CORRECT:
        assert r[name].status == "held", (name, r[name].evidence)


def test_a_crash_leaves_the_row_running_for_ever(runner):
    """Job 1 kills its worker mid-work. Its row stays RUNNING (models.py:256-263; nothing resets it):
    the replacement worker and the other worker take job 2 and never job 1 again."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=0.05, fault="crash", point="mid-work"),
                         JobSpec(2, tenant=2, duration=0.01)], restarts=1)
    # pending stops counting the RUNNING row once its claimer's session is gone: the run ends by itself
    assert h.ended_by == "quiescent"
    assert [e.job for e in h.executions()].count(1) == 1
    assert [(j["id"], j["status"], j["attempts"]) for j in h.jobs] == [(1, "running", 1), (2, "done", 1)]
    assert _row(runner, 1)[0] == "RUNNING"
    assert r["terminal-states"].status == "violated", r["terminal-states"].evidence
    assert "job 1" in r["terminal-states"].evidence
    assert r["attempts-counted"].status == "held", r["attempts-counted"].evidence


def test_an_overrun_runs_once(runner):
    """The body works 1.5 leases. The library has no lease, heartbeat nor recovery: nobody takes the
    job back, it runs once and is done (the lease is a harness knob it never reads)."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="overrun"), JobSpec(2, tenant=2, duration=0.01)])
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1), ("done", 1)]
    assert [e.job for e in h.executions()].count(1) == 1
    for name in ("single-commit", "no-overlap", "at-most-once-effects", *CORRECT):
        assert r[name].status == "held", (name, r[name].evidence)


# The claim's UPDATE (models.py:256-263) as the statement points name it: the digest of Django 5.2.19's
# text, UPDATE "django_tasks_database_dbtaskresult" SET "status" = %s, "started_at" = %s, "worker_ids" = %s
# WHERE "django_tasks_database_dbtaskresult"."id" = %s (workers/body/statements.py name_of).
CLAIM_UPDATE = "sql:6a5a3225"


def test_a_pause_inside_the_claim_holds_the_horizon(runner):
    """db_worker.py:116-123: the worker is stopped right before its claim's UPDATE, after its SELECT
    ... FOR UPDATE SKIP LOCKED locked the row (an xid): its transaction stays open for the pause (two
    leases). The job is claimed and done once when it resumes; the row was skipped, not taken, meanwhile.
    django-tasks-db has no lease (only its poll interval scales): horizon reports how long the claim's
    transaction was held, without a verdict from the harness's lease."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=0.01)], workers=1,
                events=(Event("pause", None, CLAIM_UPDATE),))
    assert any(i.get("fault") == "pause" and i.get("point") == CLAIM_UPDATE for i in h.injected), h.injected
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)]
    assert (r["horizon"].status, r["horizon"].judged) == ("unknown", False), r["horizon"].evidence
    # the library's session, not the body's: the figure, and why there is no verdict
    assert "the longest worker transaction sampled: w1.0/queue held a transaction with an xid" in \
        r["horizon"].evidence
    assert "no verdict: django-tasks-db has no lease the harness sets" in r["horizon"].evidence
    for name in ("single-commit", "no-overlap", *CORRECT):
        assert r[name].status == "held", (name, r[name].evidence)


def test_one_body_at_a_time(runner):
    """db_worker runs one task at a time (db_worker.py:106-128: claim, run, fetch again): three jobs of
    one worker never overlap, the body's pool no longer the bound (DesignHandle.pool_size)."""
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=0.5) for i in range(1, 4)], workers=1)
    assert h.ended_by == "quiescent"
    assert DjangoTasks().concurrency == 1 and h.schedule.pool_size > 1
    assert overlap.bodies_at_once(h).worker == 1
