"""pgqueuer (the real library, adapters/pgqueuer.py) under the harness: fault-free, one crash schedule
and one pause schedule, each asserting what pgqueuer's own code implies.

Where the behaviour comes from (pgqueuer 1.6.0, site-packages/pgqueuer):
- adapters/persistence/qb.py, QueryQueueBuilder.build_dequeue_query: CTE ``next_stale`` re-picks a
  ``picked`` job whose heartbeat is older than ``heartbeat_timeout``; the ``claimed`` UPDATE sets
  status/updated/heartbeat/queue_manager_id and leaves ``attempts`` alone. A re-pick is not counted,
  and no limit applies to it.
- adapters/persistence/qb.py, build_log_job_query (the finish): ``DELETE FROM pgqueuer WHERE id = ANY(..)``
  -- by id only, whoever holds the job now; build_update_heartbeat_query likewise. No fencing.
- core/qm.py, QueueManager._dispatch: runs the executor whatever became of the row meanwhile.
- core/executors.py, DatabaseRetryEntrypointExecutor.execute: retries while ``job.attempts < max_attempts``.
"""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("pgqueuer", reason="pgqueuer is not installed (pip install -e '.[libraries]')")

from pg_job_chaos import properties  # noqa: E402
from pg_job_chaos.adapters.pgqueuer import PgQueuer  # noqa: E402
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule  # noqa: E402

pytestmark = [pytest.mark.chaos]

# The smallest scale at which pgqueuer's heartbeat stays within its timeout (see PgQueuer.min_time_scale):
# lease 3 s real = heartbeat_timeout, poll 0.3 s = dequeue_timeout, a pause of 2 leases = 6 s.
SCALE = PgQueuer.min_time_scale


def _results(h) -> dict:
    return {name: r for name, r in properties.check(h).items()}


def test_fault_free_every_job_done_exactly_once(runner):
    jobs = tuple(JobSpec(i, tenant=(i % 7) + 1, duration=0.01) for i in range(1, 21))
    h = runner.run(Schedule(jobs=jobs, workers=2, design="pgqueuer", time_scale=SCALE))
    assert h.ended_by == "quiescent"
    assert [j["status"] for j in h.jobs] == ["done"] * 20
    assert [j["attempts"] for j in h.jobs] == [1] * 20
    assert sorted(r["job_id"] for r in h.runs) == list(range(1, 21))
    execs = h.executions()
    assert Counter(e.job for e in execs) == Counter(range(1, 21))
    assert all(e.outcome == "ok" and e.attempt == 1 for e in execs)
    assert {e.worker for e in execs} <= {"w1.0", "w2.0"}
    r = _results(h)
    assert all(x.status == "held" for x in r.values()), {n: x.evidence for n, x in r.items() if x.status != "held"}


def test_crash_is_repicked_forever_and_never_counted(runner):
    """Job 1 crashes its worker (os._exit(1) mid-work) on every execution. pgqueuer's only recovery
    is the stale re-pick (qb.py ``next_stale``), which neither counts the execution (``attempts`` stays
    0, so every execution is told attempt 1) nor gives up: the job kills worker after worker until the
    restart budget is spent (2 workers + 3 restarts = 5 executions) and stays ``picked``. DatabaseRetryEntrypointExecutor's max_attempts never
    applies: no exception reaches it."""
    jobs = (JobSpec(1, tenant=1, duration=0.05, fault="crash", point="mid-work"),
            JobSpec(2, tenant=2, duration=0.05), JobSpec(3, tenant=3, duration=0.05))
    h = runner.run(Schedule(jobs=jobs, workers=2, design="pgqueuer", time_scale=SCALE, max_attempts=2,
                            restarts=3))
    assert h.ended_by == "workers-exhausted"
    execs = h.executions()
    ones = [e for e in execs if e.job == 1]
    assert len(ones) == 2 + 3  # both first workers and every restart: each dies on job 1
    assert {e.attempt for e in ones} == {1}  # job.attempts + 1: never incremented by a re-pick
    assert len({e.worker for e in ones}) == len(ones)
    states = {j["id"]: j for j in h.jobs}
    assert states[1]["status"] == "running" and states[1]["attempts"] == 1
    assert isinstance(states[1]["lease_expired"], bool)  # picked: its heartbeat against the lease
    assert states[2]["status"] == states[3]["status"] == "done"
    assert Counter(e.job for e in execs if e.job != 1) == Counter({2: 1, 3: 1})
    r = _results(h)
    assert r["bounded-attempts"].status == "violated", r["bounded-attempts"].evidence
    assert "job 1 executed 5 times (max_attempts 2)" in r["bounded-attempts"].evidence
    assert r["attempts-counted"].status == "violated"
    assert "job 1 executed 5 times, counted 1 time" in r["attempts-counted"].evidence
    assert r["bounded-blast-radius"].status == "violated"
    assert r["terminal-states"].status == "violated"
    for name in ("single-commit", "at-most-once-effects", "no-overlap", "progress", "tenant-isolation"):
        assert r[name].status == "held", (name, r[name].evidence)


def test_pause_lets_a_second_worker_run_the_job_and_both_finish(runner):
    """The worker running job 1 is stopped (SIGSTOP) mid-work for two leases: its heartbeat stops too,
    so after heartbeat_timeout the other worker's dequeue re-picks job 1 (``next_stale``, attempts
    unchanged) and runs it. When the first resumes, nothing tells it the job was taken: it sends its
    effect and commits its run, and its finish deletes the row by id (build_log_job_query)."""
    jobs = (JobSpec(1, tenant=1, duration=0.05), JobSpec(2, tenant=2, duration=0.05),
            JobSpec(3, tenant=3, duration=0.05))
    h = runner.run(Schedule(jobs=jobs, workers=2, design="pgqueuer", time_scale=SCALE, max_attempts=2,
                            events=(Event("pause", 1, "mid-work"),)))
    assert h.ended_by == "quiescent"
    assert [j["status"] for j in h.jobs] == ["done"] * 3
    ones = [e for e in h.executions() if e.job == 1]
    assert len(ones) == 2 and {e.attempt for e in ones} == {1}
    assert len({e.worker for e in ones}) == 2 and all(e.outcome == "ok" for e in ones)
    assert [r["attempt"] for r in h.runs if r["job_id"] == 1] == [1, 1]
    assert {j["id"]: j["attempts"] for j in h.jobs}[1] == 1  # pgqueuer counted one execution
    r = _results(h)
    for name in ("single-commit", "at-most-once-effects", "no-stale-effect", "attempts-counted"):
        assert r[name].status == "violated", (name, r[name].evidence)
    assert "job 1 committed 2 job_runs rows (attempts 1, 1)" in r["single-commit"].evidence
    for name in ("progress", "terminal-states", "bounded-blast-radius", "tenant-isolation"):
        assert r[name].status == "held", (name, r[name].evidence)
