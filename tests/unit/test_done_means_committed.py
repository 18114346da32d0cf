"""done-means-committed on small hand-written histories (no database)."""

from __future__ import annotations

from pg_job_chaos.properties import HELD, UNKNOWN, VIOLATED
from tests.unit.test_properties import budget_exit, died, execution, job, one, run_row, sane


def test_the_sane_history_holds():
    assert one("done-means-committed", sane()).status == HELD


def test_acknowledged_at_the_claim_a_crash_loses_the_job_and_the_table_says_done():
    h = sane(records=execution("w1.0", 1, 1, 1.0, None), jobs=[job(1)], runs=[], exits=[died("w1.0", 1)])
    result = one("done-means-committed", h)
    assert (result.status, result.jobs) == (VIOLATED, (1,))
    assert result.evidence == ("job 1 is done but no execution of it committed its work: w1.0 attempt 1 did "
                               "not end (its worker died or the run ended)")


def test_an_error_handler_that_acknowledges_is_named_with_the_error():
    h = sane(records=execution("w1.0", 1, 1, 1.0, 2.0, outcome="failed", error="RaisedError: boom"),
             jobs=[job(1)], runs=[])
    assert one("done-means-committed", h).evidence.endswith("w1.0 attempt 1 failed (RaisedError: boom)")


def test_a_later_failure_acknowledged_after_a_commit_is_a_violation_but_a_stale_commit_is_not():
    first = execution("w1.0", 1, 1, 1.0, 2.0)
    again = execution("w2.0", 1, 2, 3.0, 4.0, outcome="failed", error="RaisedError: boom")
    h = sane(records=[*first, *again], jobs=[job(1, attempts=2)], runs=[run_row(1, 1)],
             exits=[budget_exit("w1.0"), budget_exit("w2.0")])
    assert one("done-means-committed", h).evidence.startswith(
        "job 1 is done after its last execution (w2.0 attempt 2) failed (RaisedError: boom) before its work")
    # The committing execution ended last (a paused first attempt that finished after the second failed).
    late = execution("w1.0", 1, 1, 1.0, 5.0)
    h = sane(records=[*late, *again], jobs=[job(1, attempts=2)], runs=[run_row(1, 1)],
             exits=[budget_exit("w1.0"), budget_exit("w2.0")])
    assert one("done-means-committed", h).status == HELD


def test_an_error_after_the_commit_is_not_a_failure_of_the_work():
    # The commit reached the server, the reply did not: the log says failed, the table says committed.
    h = sane(records=execution("w1.0", 1, 1, 1.0, 2.0, outcome="failed", error="OperationalError: lost"),
             jobs=[job(1)], runs=[run_row(1, 1)])
    assert one("done-means-committed", h).status == HELD


def test_an_unfinished_row_is_not_a_commit_and_unread_tables_are_unknown():
    row = dict(run_row(1, 1), finished=None)
    h = sane(records=execution("w1.0", 1, 1, 1.0, None), jobs=[job(1)], runs=[row], exits=[died("w1.0", 1)])
    assert one("done-means-committed", h).status == VIOLATED
    assert one("done-means-committed", sane(jobs=[])).status == UNKNOWN


def test_a_stale_execution_failing_after_a_newer_one_committed_changed_nothing():
    # w1.0 attempt 1 paused, w2.0 attempt 2 took the job over and committed; attempt 1 woke up and failed.
    stale = execution("w1.0", 1, 1, 1.0, 6.0, outcome="failed", error="LeaseLost: lease lost")
    newer = execution("w2.0", 1, 2, 3.0, 4.0)
    h = sane(records=[*stale, *newer], jobs=[job(1, attempts=2)], runs=[run_row(1, 2, "w2.0")],
             exits=[budget_exit("w1.0"), budget_exit("w2.0")])
    assert one("done-means-committed", h).status == HELD
