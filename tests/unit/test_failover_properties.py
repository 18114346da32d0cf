"""The failover properties and ``success-final`` across a promotion, on hand-written histories (no
database): the client's records are the evidence of what the old primary acknowledged."""

from __future__ import annotations

from datetime import datetime

from pg_job_chaos.properties import HELD, VIOLATED, check
from tests.unit.test_properties import at, change, execution, history, job, one, run_row, schedule

REPLICA = ("acknowledged-enqueue", "attempts-monotonic", "failover-recovers")


def _walled(records):
    """The log's ``wall`` on the status log's clock (``at``): what success-final sets beside it."""
    return [{**r, "wall": datetime.fromisoformat(at(r["t"])).timestamp()} for r in records]


def _replicated(sched):
    return {**sched, "replica": "async"}


def lost_completion():
    """Job 1's done committed at 1.2 s (acknowledged), the primary stopped at 1.5 s before the standby
    had it; the new primary had it running; attempt 1 ran again at 2.4 s (its claim was lost too)."""
    records = _walled([*execution("w1.0", 1, 1, 1.0, 1.2), *execution("w1.1", 1, 1, 2.4, 2.6)])
    transitions = [change(1, 1, None, "queued", 0.1, attempts=0), change(2, 1, "queued", "running", 0.9),
                   change(3, 1, "queued", "running", 2.35), change(4, 1, "running", "done", 2.55)]
    return history(records=records, jobs=[job(1, "done", 1)], runs=[run_row(1, 1, "w1.1", 2.6)],
                   sched=_replicated(schedule((1,))), transitions=transitions,
                   injected=[{"t": 1.1, "fault": "failover", "job": 1},
                             {"t": 1.5, "fault": "primary-stopped"}, {"t": 1.6, "fault": "promoted"}])


def test_a_lost_completion_that_ran_again_names_the_commit_and_what_the_new_primary_had():
    r = one("success-final", lost_completion())
    assert r.status == VIOLATED and r.jobs == (1,), r.evidence
    assert r.evidence.startswith("job 1's done committed on the old primary at +1.20 s, acknowledged "
                                 "(w1.0 attempt 1); the new primary has it running (attempts 1); it ran "
                                 "again at +2.40 s (w1.1 attempt 1)"), r.evidence


def test_attempts_that_went_down_after_an_acknowledged_success_are_violated():
    r = one("attempts-monotonic", lost_completion())
    assert r.status == VIOLATED and "went down" in r.evidence and "w1.1 attempt 1" in r.evidence


def test_a_switchover_that_lost_nothing_holds_every_failover_property():
    records = _walled([*execution("w1.0", 1, 1, 1.0, outcome="failed", end=1.3),
                       *execution("w1.1", 1, 2, 2.0, 2.2)])
    h = history(records=records, jobs=[job(1, "done", 2)], runs=[run_row(1, 2, "w1.1", 2.2)],
                sched=_replicated(schedule((1,))), injected=[{"t": 1.2, "fault": "primary-stopped"}],
                transitions=[change(1, 1, None, "queued", 0.1, attempts=0),
                             change(2, 1, "queued", "running", 0.9),
                             change(3, 1, "running", "running", 1.9, attempts=2),
                             change(4, 1, "running", "done", 2.15, attempts=2)])
    results = check(h)
    assert all(results[n].status == HELD for n in (*REPLICA, "success-final")), results
    assert "0.80 s" in results["failover-recovers"].evidence


def test_a_lost_enqueue_and_a_job_left_running_are_violated():
    h = history(records=_walled(execution("w1.0", 1, 1, 1.0, outcome=None)), jobs=[job(1, "running", 1)],
                sched=_replicated(schedule((1, 2))), injected=[{"t": 1.5, "fault": "primary-stopped"}],
                transitions=[change(1, 1, None, "queued", 0.1, attempts=0)], ended_by="stalled", t1=9.5)
    r = one("acknowledged-enqueue", h)
    assert r.status == VIOLATED and r.jobs == (2,) and "after 1 failover" in r.evidence
    r = one("failover-recovers", h)
    assert r.status == VIOLATED and "job 1 ended running" in r.evidence and "8.00 s after" in r.evidence


def test_without_a_replica_the_failover_properties_are_not_in_the_table():
    h = lost_completion()
    h.schedule = h.schedule.replace(replica=None)
    results = check(h)
    assert not set(REPLICA) & set(results) and results["success-final"].status == VIOLATED


def test_the_failover_experiment_counts_from_the_history():
    from pg_job_chaos.harness.experiments.failover import _one

    r = _one(lost_completion())
    assert (r["lost"], r["twice"], r["stuck"], r["promoted"]) == (1, 1, 0, True)
    assert abs(r["recover"] - 0.9) < 1e-9  # the primary stopped at 1.5 s, the next execution at 2.4 s
