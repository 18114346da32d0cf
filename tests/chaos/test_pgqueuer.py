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
from pg_job_chaos.core import overlap  # noqa: E402
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule  # noqa: E402

pytestmark = [pytest.mark.chaos]

# The smallest scale at which pgqueuer's heartbeat keeps its own margin through one failed flush despite
# the fixed 1 s notify wait (PgQueuer.min_time_scale, TIMING "notify wait"): lease 10 s real =
# heartbeat_timeout = dequeue_timeout (the documented 30 s : 30 s), a pause of 2 leases = 20 s.
SCALE = PgQueuer.min_time_scale


def _picks(runner, job: int) -> int:
    """pgqueuer's own record of the claims of a schedule job (pgqueuer_log 'picked' rows, re-picks
    included), read before the next run resets it."""
    return runner.admin.execute(
        "select count(*) from pgqueuer_log l join job_map m on m.library_id = l.job_id::text "
        "where m.job_id = %s and l.status = 'picked'", [job]).fetchone()[0]


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
    assert all(x.status == "held" for x in r.values()), \
        {n: x.evidence for n, x in r.items() if x.status != "held"}


def test_crash_is_repicked_forever_and_never_counted(runner):
    """Job 1 crashes its worker (os._exit(1) mid-work) on every execution. pgqueuer's only recovery
    is the stale re-pick (qb.py ``next_stale``), which neither counts the execution (``attempts`` stays
    0, so every execution is told attempt 1) nor gives up: the job kills worker after worker until the
    restart budget is spent (2 workers + 1 restart = 3 executions) and stays ``picked``. """ \
    """DatabaseRetryEntrypointExecutor's max_attempts never
    applies: no exception reaches it.

    Jobs 2 and 3 never fault, yet never finish: at pgqueuer's default batch_size (10) each dequeue
    takes every queued job -- and, after a crash, every stale one: the three were picked and heartbeat
    together -- so every worker that takes job 1 takes them too, runs their bodies at once with job
    1's (pgqueuer dispatches every job it picked, qm.py), and dies with them picked: executed with job 1
    each time, never finished, never counted. (With ``batch_size=1 max_concurrent_tasks=2``, the lowest,
    the other worker ran them to the end.)"""
    jobs = (JobSpec(1, tenant=1, duration=0.05, fault="crash", point="mid-work"),
            JobSpec(2, tenant=2, duration=0.05), JobSpec(3, tenant=3, duration=0.05))
    # The schedule docs/findings/libraries/schedules/pgqueuer-repick-uncounted.json (one restart: 3 executions
    # already pass max_attempts 2), built here as the page's file holds it.
    h = runner.run(Schedule(jobs=jobs, workers=2, design="pgqueuer", time_scale=SCALE, max_attempts=2,
                            restarts=1))
    assert h.ended_by == "workers-exhausted"
    execs = h.executions()
    ones = [e for e in execs if e.job == 1]
    assert len(ones) == 2 + 1  # both first workers and the restart: each dies on job 1
    assert {e.attempt for e in ones} == {1}  # job.attempts + 1: never incremented by a re-pick
    assert len({e.worker for e in ones}) == len(ones)
    states = {j["id"]: j for j in h.jobs}
    assert states[1]["status"] == "running" and states[1]["attempts"] == 1
    assert isinstance(states[1]["lease_expired"], bool)  # picked: its heartbeat against the lease
    assert states[2]["status"] == states[3]["status"] == "running"  # picked by the last worker to die
    others = [e for e in execs if e.job != 1]  # started at once with job 1 (when the crash left time)
    assert {e.worker for e in others} <= {e.worker for e in ones} and {e.outcome for e in others} <= {"info"}
    assert _picks(runner, 1) == _picks(runner, 2) == _picks(runner, 3) == 3  # one dequeue took all three
    r = _results(h)
    assert r["bounded-attempts"].status == "violated", r["bounded-attempts"].evidence
    assert "job 1 executed 3 times (max_attempts 2)" in r["bounded-attempts"].evidence
    assert r["attempts-counted"].status == "violated"
    assert "job 1 executed 3 times, counted 1 time" in r["attempts-counted"].evidence
    assert r["bounded-blast-radius"].status == "violated"
    assert r["terminal-states"].status == "violated"
    assert r["progress"].status == "violated"  # the compare's pgqueuer S5, at the default batch
    assert "job 2 (no fault) ended running after job 1's fault" in r["progress"].evidence
    for name in ("single-commit", "at-most-once-effects", "no-overlap", "tenant-isolation"):
        assert r[name].status == "held", (name, r[name].evidence)


def test_pause_lets_a_second_worker_run_the_job_and_both_finish(runner):
    """The worker running job 1 is stopped (SIGSTOP) mid-work for three leases: its heartbeat stops too,
    so after heartbeat_timeout the other worker's dequeue re-picks job 1 (``next_stale``, attempts
    unchanged) and runs it. When the first resumes, nothing tells it the job was taken: it sends its
    effect and commits its run, and its finish deletes the row by id (build_log_job_query).

    At pgqueuer's default batch_size (10) the paused worker had picked jobs 2 and 3 with job 1 (their
    bodies running with job 1's, frozen with it): they go stale with it, the other worker re-picks and
    runs all three, and the woken worker then finishes 2 and 3 again -- jobs another worker had
    already finished (QueueManager._dispatch runs whatever it dequeued) -- or had finished them just
    before the stop with their completions still unflushed in its buffer: re-picked all the same.

    Three leases, not the default two: the job is stale up to one lease after the pause (its last beat
    up to half a lease before it, plus the buffer), and an idle worker dequeues up to dequeue_timeout (one
    lease) later, so the re-pick can come two leases in -- at the wake, with the default pause."""
    jobs = (JobSpec(1, tenant=1, duration=0.05), JobSpec(2, tenant=2, duration=0.05),
            JobSpec(3, tenant=3, duration=0.05))
    h = runner.run(Schedule(jobs=jobs, workers=2, design="pgqueuer", time_scale=SCALE, max_attempts=2,
                            events=(Event("pause", 1, "mid-work", duration=3.0),)))
    assert h.ended_by == "quiescent"
    assert [j["status"] for j in h.jobs] == ["done"] * 3
    ones = [e for e in h.executions() if e.job == 1]
    assert len(ones) == 2 and {e.attempt for e in ones} == {1}
    assert len({e.worker for e in ones}) == 2 and all(e.outcome == "ok" for e in ones)
    assert [r["attempt"] for r in h.runs if r["job_id"] == 1] == [1, 1]
    assert {j["id"]: j["attempts"] for j in h.jobs}[1] == 1  # pgqueuer counted one execution
    paused = next(i for i in h.injected if i["fault"] == "pause")
    execs = h.executions()
    assert Counter(e.job for e in execs) == Counter({1: 2, 2: 2, 3: 2})  # the whole batch, twice
    late = [e for e in execs if e.job != 1 and e.worker == paused["worker"]]
    # Jobs 2 and 3 ran once in the paused worker and once in the other. Whether their bodies were frozen
    # with job 1's (ending after the wake) or had ended just before the stop, their completions still in
    # the stopped worker's buffer, is timing (beside busy loops both were seen): either way they went
    # stale with job 1 and were re-picked.
    assert sorted(e.job for e in late) == [2, 3] and all(e.outcome == "ok" for e in late)
    assert all(e.start < paused["t"] for e in late)  # dispatched with job 1's batch, before the stop
    r = _results(h)
    for name in ("single-commit", "at-most-once-effects", "no-stale-effect", "attempts-counted",
                 "no-overlap"):
        assert r[name].status == "violated", (name, r[name].evidence)
    assert "job 1 committed 2 job_runs rows (attempts 1, 1)" in r["single-commit"].evidence
    for name in ("progress", "terminal-states", "bounded-blast-radius", "tenant-isolation"):
        assert r[name].status == "held", (name, r[name].evidence)
    # What pgqueuer accepted (pgqueuer_log, read by adapters/finishes.py): one 'successful' row for job 1,
    # the re-pick's. The woken execution's finish found no row: build_log_job_query (qb.py:677-715)
    # deletes "WHERE id = ANY(..)" (qb.py:684-685) -- by id, whoever holds the job -- and logs only what
    # it deleted ("INNER JOIN all_resolved", qb.py:704), so a second finish of a deleted job is dropped
    # without a trace. Nothing fences a stale finish, though: the claim's UPDATE sets queue_manager_id
    # (qb.py:538-542), which neither the finish nor retry_job ("WHERE id = $1::bigint", qb.py:814) reads.
    # Had the woken execution returned while the re-pick still ran, pgqueuer would have taken its finish
    # and dropped the re-pick's (procrastinate does just that: test_procrastinate.py,
    # test_a_woken_executions_finish_is_taken_while_the_re_run_is_doing). This pause outlasts the re-run:
    # pgqueuer's record holds, and the body-first violations above are at-least-once by design.
    lib = r["library-one-finish"]
    assert lib.status == "held", lib.evidence
    assert f"no finish of the stale job 1's {paused['worker']} attempt 1" in lib.evidence, lib.evidence
    assert {r[n].cause for n in ("single-commit", "at-most-once-effects",
                                 "no-stale-effect")} == {"at-least-once"}


def test_pgqueuers_finish_takes_a_stale_managers_and_drops_the_re_picks(runner):
    """What the pause test's comment says pgqueuer would do, driven through pgqueuer's own queries (no
    harness run, ~1 s): manager A dequeues job 1, its heartbeat goes stale, manager B re-picks it
    (qb.py next_stale), A finishes first and B after. ``log_jobs`` deletes by id (qb.py:684-685) and
    logs what it deleted (qb.py:704): A's stale finish is taken, B's leaves no trace -- and the one
    'successful' row names no manager, so only the harness's execution log can tell whose it was."""
    import asyncio
    import uuid
    from datetime import timedelta

    import psycopg
    from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
    from pgqueuer.adapters.persistence.queries import Queries
    from pgqueuer.ports.repository import EntrypointExecutionParameter

    design = runner.prepare(runner.stamp(Schedule(jobs=(JobSpec(1),), design="pgqueuer", time_scale=SCALE)))

    async def two_managers():
        async with await psycopg.AsyncConnection.connect(runner.database.admin_dsn, autocommit=True) as conn:
            queries, entrypoints = Queries(PsycopgDriver(conn)), {"pgjc": EntrypointExecutionParameter(0)}
            stale = timedelta(seconds=0.2)
            (a,) = await queries.dequeue(1, entrypoints, uuid.uuid4(), None, stale)
            await asyncio.sleep(0.5)  # A's heartbeat is older than heartbeat_timeout: B may re-pick
            (b,) = await queries.dequeue(1, entrypoints, uuid.uuid4(), None, stale)
            await queries.log_jobs([(a, "successful", None)])  # the stale manager returns first
            between = await (await conn.execute("select clock_timestamp()")).fetchone()
            await queries.log_jobs([(b, "successful", None)])
            return a.id == b.id, between[0]

    same, between = asyncio.run(two_managers())
    assert same
    (accepted,) = design.accepted_finishes(runner.admin).values()
    assert accepted["recorded"] == "pgqueuer_log queued, picked, picked, successful"
    (success,) = accepted["finishes"]
    assert success["outcome"] == "success" and success["at"] < between  # A's: written before B returned


def test_every_job_picked_runs_at_once(runner):
    """pgqueuer's default concurrency is unlimited (QueueManager.run(max_concurrent_tasks=None); fetch_jobs
    dequeues batch after batch, each picked job dispatched at once): ten jobs of one worker all run at
    once -- on the body's pool, sized to them (DesignHandle.pool_size), and asyncio.to_thread's threads
    (workers/hosted/protocol.py body_threads: asyncio's own six would have bounded them)."""
    jobs = tuple(JobSpec(i, tenant=i, duration=0.1) for i in range(1, 11))
    h = runner.run(Schedule(jobs=jobs, workers=1, design="pgqueuer", time_scale=SCALE))
    assert h.ended_by == "quiescent"
    assert PgQueuer().concurrency is None
    assert overlap.bodies_at_once(h).worker == 10
