"""``success-final`` on hand-written histories (no database): a committed success stays final."""

from __future__ import annotations

from pg_job_chaos.properties import HELD, UNKNOWN, VIOLATED
from tests.unit.test_properties import (
    change,
    execution,
    history,
    job,
    lifecycle,
    one,
    run_row,
    sane,
    schedule,
)

NAME = "success-final"
SWEEP = "update jobs set status = $1, locked_until = null where id = $2"


def one_job(*, status="done", attempts=1, transitions, runs=None, records=None):
    return history(records=records if records is not None else execution("w1.0", 1, 1, 1.0, 2.0),
                   jobs=[job(1, status, attempts)], runs=runs if runs is not None else [run_row(1, 1)],
                   sched=schedule((1,)), transitions=transitions)


def test_a_finished_job_that_stays_done_holds():
    r = one(NAME, sane())
    assert r.status == HELD and "2 jobs" in r.evidence and "6 status changes" in r.evidence


def test_a_stale_write_back_after_the_success_names_its_statement():
    # the sweep read job 1 as expired before its success, and wrote queued back after it
    h = one_job(status="queued", transitions=[*lifecycle(1, 1.0, 2.0, first_seq=1),
                                              change(4, 1, "done", "queued", 2.4, query=SWEEP)])
    r = one(NAME, h)
    assert (r.status, r.jobs) == (VIOLATED, (1,)), r.evidence
    assert "done -> queued 400 ms later" in r.evidence and SWEEP in r.evidence


def test_a_job_turned_dead_and_back_to_done_is_still_violated():
    # the final table says done: only the record of its changes shows it was dead meanwhile
    h = one_job(transitions=[*lifecycle(1, 1.0, 2.0, first_seq=1), change(4, 1, "done", "dead", 2.2),
                             change(5, 1, "dead", "done", 2.3)])
    r = one(NAME, h)
    assert r.status == VIOLATED and "done -> dead" in r.evidence and "1 more change" in r.evidence


def test_a_change_before_the_job_runs_row_committed_is_not_after_the_success():
    # a split finish: done first, then (later) the job_runs row; a change in between is not after it
    h = one_job(runs=[run_row(1, 1, finished=3.0)],
                transitions=[*lifecycle(1, 1.0, 2.0, first_seq=1), change(4, 1, "done", "running", 2.5),
                             change(5, 1, "running", "done", 2.9)])
    assert one(NAME, h).status == HELD


def test_an_execution_after_the_success_is_violated():
    records = [*execution("w1.0", 1, 1, 1.0, 2.0), *execution("w2.0", 1, 2, 2.5, 3.0)]
    h = one_job(records=records, transitions=lifecycle(1, 1.0, 2.0, first_seq=1))
    r = one(NAME, h)
    assert r.status == VIOLATED and "executed again" in r.evidence and "w2.0 attempt 2" in r.evidence


def test_a_success_that_ends_other_than_done_is_violated():
    # the final table disagrees with the log (the change was not logged): the table still decides
    h = one_job(status="dead", transitions=lifecycle(1, 1.0, 2.0, first_seq=1))
    r = one(NAME, h)
    assert r.status == VIOLATED and "ended dead" in r.evidence


def test_unknown_without_the_record_of_changes_never_held():
    r = one(NAME, one_job(transitions=None))
    assert r.status == UNKNOWN and "not recorded" in r.evidence and r.judged  # the run's: --strict fails


def test_unknown_when_the_queue_is_not_the_harness_table():
    r = one(NAME, one_job(transitions=[]))  # a design with a jobs table of its own: nothing logged
    assert r.status == UNKNOWN and "table of its own" in r.evidence and not r.judged  # --strict passes


def test_vacuous_when_no_success_committed():
    h = one_job(status="dead", runs=[], transitions=[change(1, 1, None, "queued", 0.1),
                                                     change(2, 1, "queued", "dead", 1.0)])
    r = one(NAME, h)
    assert r.status == HELD and "vacuous" in r.evidence


def hosted(finishes, status="done", records=None):
    h = one_job(status=status, records=records, transitions=[])
    h.hosted, h.design, h.finishes = True, "somelib", finishes
    return h


def test_hosted_without_its_own_record_is_unknown():
    r = one(NAME, hosted(None))
    assert r.status == UNKNOWN and "somelib" in r.evidence and "accepted_finishes" in r.evidence
    assert not r.judged


def test_hosted_a_failure_after_the_success_is_violated():
    finishes = [{"job": 1, "recorded": "its table", "complete": True,
                 "finishes": [{"outcome": "success", "what": "completed", "t": 2.0},
                              {"outcome": "requeued", "what": "retry", "t": 2.5}]}]
    r = one(NAME, hosted(finishes, status="queued"))
    assert r.status == VIOLATED and "then a requeued" in r.evidence


def test_hosted_one_success_holds_from_its_own_record():
    finishes = [{"job": 1, "recorded": "its table", "complete": True,
                 "finishes": [{"outcome": "success", "what": "completed", "t": 2.0}]}]
    r = one(NAME, hosted(finishes))
    assert r.status == HELD and "own record" in r.evidence


def test_a_rolled_back_execution_with_the_same_attempt_is_not_the_success():
    # one-transaction counts the attempt in its work transaction: a terminated execution rolls the count
    # back, and the retry that commits carries the same worker and attempt
    records = [*execution("w1.0", 1, 1, 1.0, 1.2, outcome="failed", error="terminated"),
               *execution("w1.0", 1, 1, 1.5, 2.0)]
    h = one_job(records=records, transitions=lifecycle(1, 1.5, 2.0, first_seq=1))
    assert one(NAME, h).status == HELD
