"""Each fault under a hand-written schedule, and what the history shows; the article's poison job."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule, Timing

pytestmark = pytest.mark.chaos

SCALE = 0.2


def test_crash_is_exit_1_and_an_info_execution(runner):
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="crash"), JobSpec(2)), design="lease", time_scale=SCALE))
    crashed = [x for x in h.exits if x.outcome == "exit 1"]
    assert len(crashed) == 3 and {x.job for x in crashed} == {1}
    assert [e.outcome for e in h.executions() if e.job == 1] == ["info"] * 3
    assert {x.worker for x in crashed} == {"w1.0", "w1.1", "w1.2"}  # every restart a new identity
    # The lease design counts at the claim; with no sweep the job stays running, expired.
    assert h.jobs[0]["status"] == "running" and h.jobs[0]["attempts"] == 3 and h.jobs[0]["lease_expired"]
    assert h.jobs[1]["status"] == "done"


def test_kill_is_killed_by_sigkill(runner):
    h = runner.run(Schedule(jobs=(JobSpec(1), JobSpec(2)), events=(Event("kill", 1),), design="lease-fenced",
                            time_scale=SCALE))
    killed = [x for x in h.exits if not x.by_harness]
    assert [(x.outcome, x.job) for x in killed] == [("killed by SIGKILL", 1)]
    assert [i["fault"] for i in h.injected] == ["kill"]
    assert [j["status"] for j in h.jobs] == ["done", "done"]


def test_pause_lets_a_second_worker_claim_the_job(runner):
    # Four leases stopped (the default pause is two): the lease ends one lease in, and the second worker
    # then has three, not one, to claim the job -- beside two busy loops one lease (0.2 s) was too short.
    # (Past max_runtime, 5 leases, the woken worker would abandon the job instead of losing its lease.)
    h = runner.run(Schedule(jobs=(JobSpec(1),), events=(Event("pause", 1, duration=4.0),), workers=2,
                            design="lease-heartbeat", time_scale=SCALE))
    paused = next(i for i in h.injected if i["fault"] == "pause")
    resumed = next(i for i in h.injected if i["fault"] == "resume")
    others = [e for e in h.executions() if e.worker != paused["worker"]]
    assert others and paused["t"] < others[0].start < resumed["t"]  # claimed while the first was stopped
    assert len(h.runs) == 1  # the fence: one committed run
    assert any(r["event"] == "lease-lost" or "lease lost" in (r.get("error") or "") for r in h.records)


def test_hang_ends_the_run_with_the_worker_abandoned(runner):
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="hang"), JobSpec(2)), design="lease-heartbeat",
                            time_scale=SCALE, timing=Timing(max_runtime=2.0)))
    assert h.ended_by == "quiescent"
    assert [x.outcome for x in h.exits if not x.by_harness] == ["abandoned after max runtime"] * 3
    assert [j["status"] for j in h.jobs] == ["dead", "done"]  # the sweep


def test_hang_without_heartbeat_is_killed_at_the_deadline(runner):
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="hang"),), design="one-transaction", time_scale=SCALE,
                            timing=Timing(deadline=5.0)))
    assert h.ended_by == "deadline"
    assert [(x.outcome, x.by_harness, x.job) for x in h.exits] == [("killed by SIGKILL", True, 1)]


@pytest.mark.parametrize("variant", ["xid", "repeatable-read"])
def test_horizon_holder_is_visible_in_the_samples(runner, variant):
    h = runner.run(Schedule(jobs=(JobSpec(1, duration=0.5), JobSpec(2)),
                            events=(Event("horizon", 1, variant=variant),),
                            design="lease-heartbeat", time_scale=SCALE))
    held = [s for s in h.samples if s["role"] == "holder"]
    assert held
    if variant == "xid":
        assert any(s["xid"] is not None for s in held)
    else:
        assert any(s["xmin"] is not None and s["xid"] is None for s in held)


def test_terminate_records_the_connection_error(runner):
    h = runner.run(Schedule(jobs=(JobSpec(1), JobSpec(2)), events=(Event("terminate", 1),), design="lease",
                            time_scale=SCALE))
    first = h.executions()[0]
    assert first.outcome == "fail" and "terminating connection" in first.error
    assert [j["status"] for j in h.jobs] == ["done", "done"]  # retried on a new connection


def test_poison_job_one_transaction_ten_dequeues(runner):
    """The article: 10 of 10 dequeues hand out the poison job, never counted; the healthy job never runs."""
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="sql-error"), JobSpec(2)), design="one-transaction",
                            workers=1, dequeues=10, time_scale=SCALE))
    execs = h.executions()
    assert [e.job for e in execs] == [1] * 10
    assert all("division by zero" in e.error for e in execs)
    assert h.jobs[0]["attempts"] == 0 and h.jobs[0]["status"] == "queued"
    assert h.jobs[1]["status"] == "queued" and h.runs == []  # even the poison job's job_runs rows rolled back


def test_poison_job_with_the_handler_is_dead_after_3(runner):
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="sql-error"), JobSpec(2)),
                            design="one-transaction-handler", workers=1, dequeues=10, time_scale=SCALE))
    assert [e.job for e in h.executions()] == [1, 1, 1, 2]
    assert (h.jobs[0]["status"], h.jobs[0]["attempts"]) == ("dead", 3)
    assert h.jobs[1]["status"] == "done"


def test_crash_kills_every_one_transaction_worker(runner):
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="crash"), JobSpec(2)), design="one-transaction",
                            time_scale=SCALE, restarts=5))
    assert [x.outcome for x in h.exits] == ["exit 1"] * 6
    assert h.jobs[0]["attempts"] == 0 and h.ended_by == "workers-exhausted"
