"""library-one-finish (properties/library.py) on hand-made histories, the at-least-once explanation of a
hosted design's body-first violations (properties/explain.py), the history's new fields, and how the
adapters read each library's record (adapters/finishes.py) -- no database."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from pg_job_chaos.adapters import finishes as readers
from pg_job_chaos.core.history import History
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.properties import HELD, UNKNOWN, VIOLATED, check, undecided_names
from pg_job_chaos.workers import DesignHandle, load_design
from pg_job_chaos.workers.hosted import HostedDesign, finishes
from tests.unit.test_properties import budget_exit, died, execution, history, job, one, rec, run_row, sane

NAME = "library-one-finish"
RECORDED = "procrastinate_events deferred, started, deferred_for_retry, started, succeeded"


def paused(*finish: dict, design="procrastinate", hosted=True, first="finished", second="finished",
           second_end=3.5, attempts=(1, 2)) -> History:
    """A pause past the heartbeat: w1.0 takes job 1 at 1.0 and is stopped; the library re-hands the job
    to w2.0 (attempt 2, 3.0-3.5); w1.0 wakes and returns at 6.0. Both bodies committed."""
    h = history(records=[*execution("w1.0", 1, attempts[0], 1.0, 6.0, outcome=first),
                         *execution("w2.0", 1, attempts[1], 3.0, second_end, outcome=second)],
                jobs=[job(1, attempts=2)], runs=[run_row(1, 1), run_row(1, 2, "w2.0")],
                exits=[budget_exit("w1.0", 7.0), budget_exit("w2.0", 7.0)])
    h.design, h.hosted = design, hosted
    h.finishes = [{"job": 1, "recorded": RECORDED, "finishes": list(finish)}]
    return h


def fin(outcome="success", t=None, what=None, attempt=None) -> dict:
    return {"outcome": outcome, "what": what or outcome, "at": None, "t": t, "attempt": attempt}


RETRY = fin("requeued", 2.5, "deferred_for_retry")  # the recovery's, while w1.0 was stopped


def test_a_stale_executions_accepted_finish_is_violated_and_named():
    # w1.0 woke while w2.0's finish had not been taken: the library took the stale one's.
    r = one(NAME, paused(RETRY, fin("success", 6.002, "succeeded")))
    assert (r.status, r.count, r.jobs) == (VIOLATED, 1, (1,))
    assert r.evidence == (f"job 1: procrastinate accepted the success (succeeded) of w1.0 attempt 1, 3002 ms "
                          f"after w2.0 attempt 2 had started: a stale execution's finish ({RECORDED})")


def test_the_fresh_finish_accepted_and_the_stale_one_refused_holds():
    r = one(NAME, paused(RETRY, fin("success", 3.503, "succeeded")))
    assert (r.status, r.count, r.jobs) == (HELD, 0, ())
    assert r.evidence == ("procrastinate accepted 1 finish for 1 job, at most one success each, none from a "
                          "stale execution; it recorded no finish of the stale job 1's w1.0 attempt 1: "
                          "refused, or never written")


def test_a_last_finish_only_record_cannot_show_the_stale_finish_refused():
    # pg-boss, graphile-worker: a later finish overwrites the row. The fresh success is all that is left;
    # whether the stale execution's finish was taken first and overwritten cannot be told.
    h = paused(fin("success", 3.503, "state completed"), design="pg-boss")
    h.finishes[0]["complete"] = False
    r = one(NAME, h)
    assert r.status == UNKNOWN, r.evidence
    assert r.evidence.startswith("job 1's w1.0 attempt 1 was stale and pg-boss keeps only its last finish "
                                 "of a job")
    # with nothing stale, a last-finish record decides as a full one does
    h = history(records=[*execution("w1.0", 1, 1, 1.0, 2.0)], jobs=[job(1)], runs=[run_row(1, 1)],
                exits=[budget_exit("w1.0", 3.0)])
    h.design, h.hosted = "pg-boss", True
    h.finishes = [{"job": 1, "recorded": "state completed", "complete": False,
                   "finishes": [fin("success", 2.003)]}]
    assert one(NAME, h).status == HELD


def test_retries_ms_apart_are_attributed_in_order_not_to_the_next_execution():
    # procrastinate retries a raise at once: three executions ~6 ms apart, each failure recorded ~1 ms
    # after its end -- the second retry's record within SLACK of the third execution's end. The third
    # started after that record: it cannot be its source (measured: a false "stale finish" before).
    def ex(a, start, end):
        return execution("w1.0", 1, a, start, end, outcome="failed", effect=False)
    h = history(records=[*ex(1, 1.000, 1.001), *ex(2, 1.006, 1.007), *ex(3, 1.0085, 1.0095)],
                jobs=[job(1, "dead", 3)], exits=[budget_exit("w1.0", 2.0)])
    h.design, h.hosted = "procrastinate", True
    h.finishes = [{"job": 1, "recorded": "deferred_for_retry x2, failed", "finishes": [
        fin("requeued", 1.002, "deferred_for_retry"), fin("requeued", 1.008, "deferred_for_retry"),
        fin("failure", 1.011, "failed")]}]
    r = one(NAME, h)
    assert r.status == HELD, r.evidence


def test_two_successes_for_one_job_are_violated():
    r = one(NAME, paused(fin("success", 3.503), fin("success", 6.002)))
    assert r.status == VIOLATED and "job 1: procrastinate accepted 2 successful finishes" in r.evidence


def test_a_failure_taken_from_a_stale_execution_is_violated():
    # w1.0 raised on waking, while w2.0 still ran: the library took its retry (procrastinate_retry_job_v2
    # matches status 'doing', whoever runs it), then w2.0's success.
    h = paused(RETRY, fin("requeued", 6.002, "deferred_for_retry"), fin("success", 6.5), first="failed",
               second_end=6.4)
    r = one(NAME, h)
    assert r.status == VIOLATED and "the requeued (deferred_for_retry) of w1.0 attempt 1" in r.evidence


def test_undecidable_is_unknown_never_held():
    told_nothing = paused()
    told_nothing.finishes = None
    r = one(NAME, told_nothing)
    # the design's, not the run's: not judged, and --strict does not fail on it (undecided_names)
    assert (r.status, r.judged) == (UNKNOWN, False) and r.to_dict()["judged"] is False
    assert r.evidence.startswith("not judged for this design: procrastinate does not say what it accepted")
    assert undecided_names({NAME: r}) == []
    # a success no execution had returned before (a clock that does not agree)
    assert one(NAME, paused(fin("success", 0.5))).status == UNKNOWN
    # an undated failure while a failed execution was stale: whose was it?
    h = paused(fin("failure", attempt=1), first="failed", second="failed", attempts=(1, 1))
    assert "cannot tell whose" in one(NAME, h).evidence and one(NAME, h).status == UNKNOWN
    h = paused()
    h.finishes = []
    assert one(NAME, h).evidence == "procrastinate's accepted finishes say nothing of job 1"
    # ... but a violation found in one job is never hidden by another job's unknown
    h = paused(RETRY, fin("success", 6.002))
    h.jobs.append(job(2))
    assert one(NAME, h).status == VIOLATED


def test_a_built_in_design_is_vacuous_and_the_recoverys_requeue_is_no_finish():
    built_in = one(NAME, sane())
    assert built_in.status == HELD and built_in.evidence.startswith("vacuous: not a hosted queue")
    crashed = paused(RETRY, first=None, second=None)  # both died in their body (no terminal event)
    assert one(NAME, crashed).status == HELD


def test_hosted_body_first_violations_are_at_least_once_and_say_what_the_library_did():
    h = paused(RETRY, fin("success", 3.503))
    # woken, it sends
    h.records.append({"t": 5.9, "worker": "w1.0", "event": "effect", "job": 1, "attempt": 1})
    res = check(h)
    sc = res["single-commit"]
    assert sc.status == VIOLATED and sc.cause == "at-least-once" and \
        sc.to_dict()["caused_by"] == "at-least-once"
    assert sc.evidence.startswith("the body's work ran before procrastinate's finish committed (its effect, "
                                  "and its job_runs row unless procrastinate commits it with its finish): "
                                  "at-least-once by design, not procrastinate's fence (procrastinate "
                                  "accepted at most one success per job, none stale: library-one-finish "
                                  "held): job 1 committed 2")
    assert res["no-stale-effect"].cause == res["at-most-once-effects"].cause == "at-least-once"
    assert "but procrastinate also accepted" in \
        check(paused(RETRY, fin("success", 6.002)))["single-commit"].evidence
    # a built-in design's violation stays a finding of its own
    assert check(paused(RETRY, hosted=False))["single-commit"].cause == ""


def test_your_own_hosted_queue_is_named_in_the_evidence_never_called_a_library():
    h = paused(RETRY, fin("success", 3.503), design="my-queue")
    h.records.append({"t": 5.9, "worker": "w1.0", "event": "effect", "job": 1, "attempt": 1})
    sc = check(h)["single-commit"]
    assert sc.evidence.startswith("the body's work ran before my-queue's finish committed (its effect, and "
                                  "its job_runs row unless my-queue commits it with its finish): "
                                  "at-least-once by design, not my-queue's fence (my-queue accepted at most "
                                  "one success per job")
    h.finishes = None  # no accepted_finishes hook
    res = check(h)
    assert res[NAME].evidence == ("not judged for this design: my-queue does not say what it accepted (its "
                                  "design has no accepted_finishes, or it returns None): implement "
                                  "accepted_finishes to have my-queue's own record of its finishes judged")
    assert res["single-commit"].evidence.startswith(
        "the body's work ran before my-queue's finish committed (its effect, and its job_runs row unless "
        "my-queue commits it with its finish): at-least-once by design, not "
        "my-queue's fence (what my-queue accepted is unknown: library-one-finish): ")
    assert all("librar" not in r.evidence.replace("library-one-finish", "") for r in res.values()), res


def test_the_history_keeps_what_the_library_accepted():
    h = paused(fin("success", 3.503))
    again = History.from_dict(json.loads(h.to_json()))
    assert (again.hosted, again.finishes) == (True, h.finishes)
    assert History.from_dict({k: v for k, v in h.to_dict().items()
                              if k not in ("hosted", "finishes")}).hosted is False


def test_finishes_are_dated_on_the_execution_logs_clock():
    at = datetime(2025, 1, 1, tzinfo=UTC)
    data = {2: {"finishes": [{"outcome": "success", "at": at, "what": "succeeded"}], "recorded": "r"},
            1: {"finishes": [{"outcome": "failure", "at": at, "clock": "worker", "attempt": "1"},
                             {"outcome": "failure", "at": None}]}}
    out = finishes.convert(data, {"database": at.timestamp() - 10.0, "worker": at.timestamp() - 20.0})
    assert [e["job"] for e in out] == [1, 2]
    assert out[1]["finishes"] == [{"outcome": "success", "what": "succeeded", "at": at.isoformat(), "t": 10.0,
                                   "attempt": None, "clock": "database"}]
    assert [(f["t"], f["attempt"]) for f in out[0]["finishes"]] == [(20.0, 1), (None, None)]
    with pytest.raises(ValueError, match="outcome 'done' is not one of success, failure, requeued"):
        finishes.convert({1: {"finishes": [{"outcome": "done", "at": None}]}}, {})


def test_reading_a_design_that_cannot_tell_or_fails():
    class Quiet(HostedDesign):
        pass

    class Broken(HostedDesign):
        name = "broken"

        def accepted_finishes(self, conn):
            raise RuntimeError("no\ntable")

    def run_of(handle):
        return handle.for_run(Schedule(jobs=(JobSpec(1),)))

    assert finishes.read(run_of(DesignHandle.of(Quiet())), None) == (None, None)
    assert finishes.read(run_of(load_design("lease")), None) == (None, None)  # a built-in has no hook
    assert finishes.read(run_of(DesignHandle.of(Broken())), None) == (
        None, "broken's accepted_finishes raised RuntimeError: no table")
    assert DesignHandle.of(Quiet()).hosted and not load_design("lease").hosted


def rows(columns: str, *values: tuple) -> list[dict]:
    """Rows of an adapter's accepted_finishes statement, as the declared design hands them over."""
    return [dict(zip(columns.split(), v, strict=True)) for v in values]


def test_what_each_library_recorded_becomes_finishes():
    t = [datetime(2025, 1, 1, 0, 0, s, tzinfo=UTC) for s in range(6)]
    p = readers.procrastinate(rows(
        "id status attempts event at",
        (1, "succeeded", 2, "deferred", t[0]), (1, "succeeded", 2, "started", t[1]),
        (1, "succeeded", 2, "deferred_for_retry", t[2]), (1, "succeeded", 2, "started", t[3]),
        (1, "succeeded", 2, "succeeded", t[4]),
        (2, "succeeded", 1, "deferred", t[0]), (2, "succeeded", 1, "cancelled", t[5]),
        (3, "todo", 0, None, None)))
    assert [(f["outcome"], f["what"]) for f in p[1]["finishes"]] == [("requeued", "deferred_for_retry"),
                                                                     ("success", "succeeded")]
    assert p[1]["recorded"] == f"{RECORDED}; status succeeded, attempts 2"
    assert p[2]["finishes"] == [{"outcome": "success", "what": "cancelled (todo -> succeeded)", "at": t[5]}]
    assert p[3] == {"finishes": [], "recorded": "procrastinate_events no event; status todo, attempts 0"}
    q = readers.pgqueuer(rows("id status at traceback", (1, "queued", t[0], False),
                              (1, "picked", t[1], False),
                              (1, "queued", t[2], True), (1, "picked", t[3], False),
                              (1, "successful", t[4], False), (2, None, None, None)))
    assert [(f["outcome"], f["what"]) for f in q[1]["finishes"]] == [("failure", "retry_job"),
                                                                     ("success", "successful")]
    assert q[1]["recorded"] == "pgqueuer_log queued, picked, queued (retry), picked, successful"
    assert q[2] == {"finishes": [], "recorded": "pgqueuer_log no row"}
    c = readers.chancy(rows("id state attempts max_attempts errors completed_at",
                            (1, "succeeded", 2, 3, [{"attempt": 0, "traceback": "x"}], t[5]),
                            (2, "failed", 1, 1, [{"attempt": 0}], t[4]), (3, "running", 0, 4, [], None)))
    assert [(f["outcome"], f["at"], f["attempt"]) for f in c[1]["finishes"]] == [("failure", None, 1),
                                                                                  ("success", t[5], 2)]
    assert [(f["outcome"], f["at"], f["what"]) for f in c[2]["finishes"]] == [("failure", t[4],
                                                                               "errors[0], state failed")]
    assert c[3]["finishes"] == [] and \
        c[3]["recorded"] == "chancy_jobs state running, attempts 0, 0 errors, max_attempts 4"
    a = readers.awa(rows(
        "id state attempt run_lease finalized_at errors clock",
        (1, "completed", 2, 7, t[3], [{"error": "boom", "attempt": 1, "at": t[1].isoformat()}], "worker"),
        (2, "retryable", 2, 9, None, [{"error": "heartbeat stale (rescued)", "attempt": 1, "at": None}],
         "database"),
        (3, None, None, None, None, [], "worker")))
    assert a[1]["finishes"] == [
        {"outcome": "failure", "what": "boom", "at": t[1], "clock": "worker", "attempt": 1},
        {"outcome": "success", "what": "completed", "at": t[3], "clock": "worker", "attempt": 2}]
    assert a[1]["recorded"] == "awa.jobs state completed, attempt 2, run_lease 7, errors [1: boom]"
    assert [(f["outcome"], f["at"]) for f in a[2]["finishes"]] == [("requeued", None)]  # a rescue: a recovery
    assert 3 not in a  # pruned: awa's record says nothing
    # two completions of one job (a rescue raced the first: awa's bug), the rescue in one row's errors only
    rescue = {"error": "receipt claim stale: worker presumed dead", "attempt": 1, "at": t[2].isoformat()}
    two = readers.awa(rows("id state attempt run_lease finalized_at errors clock",
                           (1, "completed", 2, 2, t[4], [rescue], "worker"),
                           (1, "completed", 1, 1, t[1], [], "worker")))
    assert [(f["outcome"], f["attempt"]) for f in two[1]["finishes"]] == [("requeued", 1), ("success", 1),
                                                                           ("success", 2)]
    assert two[1]["recorded"] == ("awa.jobs state completed, attempt 1, run_lease 1, errors [none] | "
                                  "awa.jobs state completed, attempt 2, run_lease 2, errors [1: receipt "
                                  "claim stale: worker presumed dea]")  # 40 characters of the error


def test_a_death_of_the_library_itself_is_no_failure_it_received():
    """A pool child that dies under a job (chancy's process executor) is a failure the library, alive,
    saw; a worker contract's client that dies is the library: a failure recorded later (pg-boss's
    expiration) is its recovery's, which no execution explains."""
    def ran(library: bool) -> History:
        start = {**rec(1.0, "w1.0", "started", 1, 1), "pid": 4242}
        gone = {"t": 1.3, "worker": "w1.0", "event": "process-exit", "exited": 4242, "since": 1.2,
                **({"library": True} if library else {})}
        h = history(records=[start, gone], jobs=[job(1, "dead")], exits=[died("w1.0", 1, t=1.4)])
        h.design, h.hosted = "pg-boss", True
        h.finishes = [{"job": 1, "recorded": "state failed",
                       "finishes": [fin("failure", 5.0, "state failed")]}]
        return h

    child = ran(library=False)
    assert [(e.end, e.process_ended) for e in child.executions()] == [(1.2, True)]
    assert one(NAME, child).status == HELD
    itself = ran(library=True)
    assert [(e.end, e.process_ended) for e in itself.executions()] == [(1.2, False)]
    r = one(NAME, itself)
    assert r.status == UNKNOWN and "no execution of the job explains" in r.evidence, r.evidence
