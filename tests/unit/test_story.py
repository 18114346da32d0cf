"""The counterexample's story (issue 50), without a database: the event every property family names
(``Result.event``) and the "what happened" paragraph told from it (``harness/report/story.py``) -- which
jobs, which workers, in which order, in three sentences at most. A real run's story is checked by
``tests/integration/test_html.py`` against the page's bars."""

from __future__ import annotations

import re

from pg_job_chaos.core.history import History
from pg_job_chaos.harness.report import story, text
from pg_job_chaos.harness.report.result import Saved
from pg_job_chaos.properties import PROPERTIES, check
from pg_job_chaos.properties.core import REGISTRY
from tests.unit.test_failover_properties import _walled, lost_completion
from tests.unit.test_fairness import _fifo_flood
from tests.unit.test_library_finishes import RETRY, fin, paused
from tests.unit.test_properties import (
    died,
    execution,
    history,
    job,
    lifecycle,
    rec,
    run_row,
    sample,
    sane,
    schedule,
)
from tests.unit.test_share import _history as share_history
from tests.unit.test_statement_tenants import stmt
from tests.unit.test_success_final import one_job


def sentences(told: str) -> int:
    return len(re.findall(r"[.](?:\s|$)", told))


def on_session(records: list[dict], backend: int) -> list[dict]:
    """*records* of one execution, read on server session *backend*."""
    return [{**r, "backend": backend} if r["event"] == "tenant-inherited" else r for r in records]


def told(h: History, name: str) -> tuple[str, object]:
    r = check(h, [name])[name]
    assert r.status == "violated", r
    said = story.what_happened(h, name, r)
    assert sentences(said) <= 3 and said.endswith(f"{story.PROMISES[name]}."), said
    return said, r.event


def test_every_property_that_can_be_violated_has_its_promise_said():
    assert set(story.PROMISES) == set(REGISTRY)


def test_tenant_leak_names_the_job_before_it_on_the_session_then_the_statement():
    h = history(records=[*on_session(execution("w1.0", 1, 1, 1.0, 2.0), 300),
                         *on_session(execution("w1.0", 2, 1, 3.0, 4.0, tenant=4), 300),
                         stmt(3.5, 2, "1")],
                jobs=[job(1), job(2, tenant=4)], runs=[run_row(1, 1), run_row(2, 1)])
    said, event = told(h, "tenant-isolation")
    assert (event.job, event.attempt, event.worker) == (2, 1, "w1.0")
    assert said.startswith("w1.0 ran job 1 (tenant 1) on session 300 from +1.00 s, then w1.0 ran job 2 "
                           "(tenant 4, attempt 1) on the same session from +3.00 s."), said
    assert 'At +3.50 s, job 2 ran "select count(*) from documents" as tenant 1.' in said


def test_a_double_commit_names_both_executions_in_start_order():
    h = sane(records=[*sane().records, *execution("w2.0", 1, 2, 1.5, 2.6)],
             runs=[run_row(1, 1), run_row(1, 2, "w2.0", finished=2.6), run_row(2, 1, finished=3.0)])
    said, event = told(h, "no-overlap")
    assert (event.worker, event.job, event.attempt) == ("w2.0", 1, 2)
    first, second = said.index("w1.0 ran attempt 1"), said.index("w2.0 ran attempt 2")
    assert said.startswith("Job 1 (tenant 1) ran 2 times: ") and first < second
    assert "At +1.50 s, job 1: w2.0 attempt 2 started while w1.0 attempt 1 still ran." in said


def test_attempts_past_the_limit_name_the_execution_past_it():
    records = [r for a in range(1, 5) for r in execution(f"w{a}.0", 1, a, float(a), a + 0.5, outcome="failed",
                                                         error="boom")]
    h = history(records=records, jobs=[job(1, "dead", attempts=4)], sched=schedule((1,)))
    said, event = told(h, "bounded-attempts")
    assert (event.worker, event.attempt, event.t) == ("w4.0", 4, 4.0)
    assert said.startswith("Job 1 (tenant 1) ran 4 times: w1.0 ran attempt 1")
    assert "past max_attempts 3" in said
    assert [said.index(f"w{a}.0 ran attempt {a}") for a in range(1, 5)] == \
        sorted(said.index(f"w{a}.0 ran attempt {a}") for a in range(1, 5))


def test_a_crash_loop_names_the_death_past_the_limit():
    records = [r for a in range(1, 5) for r in execution(f"w{a}.0", 1, a, float(a), outcome=None)]
    exits = [died(f"w{a}.0", 1, t=a + 0.5) for a in range(1, 5)]
    h = history(records=records, jobs=[job(1, "running", attempts=4)], exits=exits, sched=schedule((1,)))
    said, event = told(h, "bounded-blast-radius")
    assert (event.kind, event.worker, event.t) == ("death", "w4.0", 4.5)


def test_horizon_names_the_transaction_and_its_span():
    h = sane(samples=[sample(1.8, 0.7, xid="9")])  # half a lease of 1 s: 0.5 s
    said, event = told(h, "horizon")
    assert (event.kind, event.worker, event.job) == ("transaction", "w1.0", 1)
    assert abs(event.since - 1.1) < 1e-9 and event.t == 1.8
    assert said.startswith("Job 1 (tenant 1) ran once: w1.0 ran attempt 1") and "held a transaction" in said


def test_progress_names_the_job_left_behind_and_its_last_execution():
    h = sane(jobs=[job(1), job(2, "queued")])
    said, event = told(h, "progress")
    assert (event.job, event.worker, event.t) == (2, "w1.0", 3.0)
    assert "job 2 (no fault) made no progress and ended queued" in said


def test_a_lost_enqueue_across_a_failover():
    sched = {**schedule((1, 2)), "replica": True}
    h = sane(sched=sched, jobs=[job(1)], runs=[run_row(1, 1)],
             injected=[{"t": 2.5, "fault": "primary-stopped", "worker": None}])
    said, event = told(h, "acknowledged-enqueue")
    assert (event.job, event.t, event.worker) == (2, 2.5, "")
    assert said.startswith("Job 2's enqueue committed and was acknowledged before the run; the primary "
                           "stopped at +2.50 s")


def test_a_starved_job_names_what_the_hot_tenant_ran_meanwhile():
    h = _fifo_flood()
    said, event = told(h, "starvation-bound")
    assert (event.kind, event.job, event.worker, event.since, event.t) == ("wait", 11, "w1.0", 0.0, 10.0)
    assert said.startswith("Job 11 (tenant 100) was enqueued at +0.00 s; while it waited, tenant 1 started "
                           "10 jobs (1, 2, 3, 4 and 6 more), from +0.00 s on."), said
    assert "At +10.00 s, w1.0 started it, 10.00 s after its enqueue." in said


def test_the_text_report_tells_it_above_the_marked_timeline():
    h = _fifo_flood()
    results = check(h, list(PROPERTIES) + ["starvation-bound"])
    saved = Saved("this replay", h.schedule, "f.json", ["starvation-bound"], h, results=results)
    lines = text.story_lines(saved)
    assert lines[0] == "what happened:" and lines[1].startswith("  starvation-bound: Job 11 (tenant 100)")
    tl = text.timeline(h, marks=text.evidence_marks(saved))
    assert ">>> starvation-bound: tenant 100's job 11 waited 10.00 s while tenant 1 ran 10 jobs" in tl


def test_a_lost_completion_across_a_failover_names_the_acknowledged_commit():
    h = lost_completion()
    said, event = told(h, "success-final")
    assert (event.kind, event.worker, event.job, event.attempt, event.t) == ("commit", "w1.0", 1, 1, 1.2)
    assert said.startswith("Job 1 (tenant 1) ran 2 times: w1.0 ran attempt 1 from +1.00 s to +1.20 s (done), "
                           "then w1.1 ran attempt 1 from +2.40 s to +2.60 s (done).")
    assert ("At +1.20 s, job 1's done, committed and acknowledged on the old primary (w1.0 attempt 1), was "
            "lost when that primary stopped at +1.50 s: the job ran again on the new one.") in said
    said, event = told(h, "attempts-monotonic")
    assert (event.worker, event.t) == ("w1.1", 2.4) and "w1.1 attempt 1 started after w1.0 attempt 1" in said


def test_a_cap_exceeded_names_the_start_that_went_over_it():
    over = share_history([("w1.0", 1, 0.0, 1.0), ("w2.0", 2, 0.5, 1.5), ("w3.0", 4, 0.0, 1.0)],
                         {1: 1, 2: 1, 3: 1, 4: 2}, cap=1)
    said, event = told(over, "tenant-cap")
    assert (event.worker, event.job, event.t) == ("w2.0", 2, 0.5)
    assert said.startswith("Job 2 (tenant 1) ran once: w2.0 ran attempt 1 from +0.50 s")
    assert "over the cap of 1" in said


def test_an_idle_worker_beside_a_lone_tenant_names_its_idle_stretch():
    tenants = {**dict.fromkeys(range(1, 7), 1), 7: 2}
    h = share_history([("w1.0", j, j - 1.0, float(j)) for j in range(1, 7)] + [("w2.0", 7, 0.0, 1.0)],
                      tenants)
    said, event = told(h, "work-conserving")
    assert (event.kind, event.worker, event.since) == ("idle", "w2.0", 1.0)
    assert said.startswith("At +") and "w2.0 ran no body for" in said


def test_connection_churn_names_the_last_connect():
    h = sane(records=[rec(i / 10, "w1.0", "connect", backend=i) for i in range(51)])
    said, event = told(h, "pool-hygiene")
    assert (event.kind, event.worker, event.t) == ("connect", "w1.0", 5.0)
    assert said == ("At +5.00 s, w1.0 opened its connection number 51, for a pool of 1. That breaks "
                    f"pool-hygiene: {story.PROMISES['pool-hygiene']}.")


def test_a_success_that_ended_otherwise_names_its_commit():
    h = one_job(status="dead", transitions=lifecycle(1, 1.0, 2.0, first_seq=1),
                records=_walled(execution("w1.0", 1, 1, 1.0, 2.0)))
    said, event = told(h, "success-final")
    assert (event.kind, event.worker, event.t) == ("commit", "w1.0", 2.0)
    assert "At +2.00 s, job 1's success committed (w1.0 attempt 1), yet it ended dead." in said


def test_a_stale_finish_a_library_accepted_names_the_execution_it_came_from():
    # w1.0 took job 1 at 1.0 and was stopped; the library re-handed it to w2.0 (attempt 2, 3.0-3.5), then
    # took w1.0's success at 6.002 when it woke: a finish of an execution whose job it had handed on.
    h = paused(RETRY, fin("success", 6.002, "succeeded"))
    said, event = told(h, "library-one-finish")
    assert (event.kind, event.worker, event.job, event.attempt, event.t) == ("finish", "w1.0", 1, 1, 6.002)
    assert said.startswith("Job 1 (tenant 1) ran 2 times: w1.0 ran attempt 1 from +1.00 s to +6.00 s (done), "
                           "then w2.0 ran attempt 2 from +3.00 s to +3.50 s (done); procrastinate's own "
                           "record of it took requeued (deferred_for_retry) at +2.50 s, then success "
                           "(succeeded) at +6.00 s."), said
    assert ("At +6.00 s, procrastinate accepted the success (succeeded) of job 1 from w1.0 attempt 1, a "
            "stale execution: w2.0 attempt 2 had started 3002 ms earlier.") in said


def test_a_second_success_a_library_accepted_names_both_executions():
    h = paused(fin("success", 3.503, "succeeded"), fin("success", 6.002, "succeeded"))
    said, event = told(h, "library-one-finish")
    assert (event.kind, event.worker, event.attempt, event.t) == ("finish", "w1.0", 1, 6.002)
    assert ("procrastinate's own record of it took success (succeeded) at +3.50 s, then success (succeeded) "
            "at +6.00 s.") in said  # in the record's order
    assert ("At +6.00 s, procrastinate accepted a second success (succeeded) of job 1, from w1.0 attempt 1, "
            "after the first from w2.0 attempt 2.") in said
    assert said.index("w1.0 ran attempt 1") < said.index("w2.0 ran attempt 2") < said.index("own record")
