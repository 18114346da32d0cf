"""procrastinate hosted under the harness (adapters/procrastinate.py): fault-free, one crash schedule,
pause schedules -- each asserted against what procrastinate's own code implies, and against what it
recorded itself (procrastinate_events, read by adapters/finishes.py: library-one-finish)."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("procrastinate", reason="procrastinate is not installed (pip install -e '.[libraries]')")

from pg_job_chaos import properties  # noqa: E402
from pg_job_chaos.adapters.procrastinate import TIMING, Procrastinate  # noqa: E402
from pg_job_chaos.core import overlap  # noqa: E402
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule, Timing  # noqa: E402
from pg_job_chaos.harness import scales  # noqa: E402
from pg_job_chaos.properties import library  # noqa: E402

pytestmark = pytest.mark.chaos

# The search's default scale (a lease of 0.5 s), above Procrastinate.min_time_scale (0.05: the recovery's
# cron, 20 leases, counts whole seconds). Every interval keeps the ratio of procrastinate's documented
# default to its 30 s stalled threshold (adapters/procrastinate.py, TIMING): the recovery runs every
# RECOVERY leases (10 s here), as the documented cron runs every 10 minutes.
SCALE = max(scales.SEARCH, Procrastinate.min_time_scale)
RECOVERY = TIMING["recovery period"].default / TIMING["stalled threshold"].default  # 20 leases
# A pause the recovery must act inside: its stalled threshold (1 lease), up to one whole period to the
# next tick, the periodic deferrer's fixed 0.5 s margin (1 lease here), then the re-run itself.
PAUSE = RECOVERY + 6
# A smaller scale for the one schedule whose re-run must still be running when the paused worker wakes
# (a lease of 0.2 s, the recovery every 4 s): the re-run starts between 1 lease + the deferrer's 0.5 s
# (2.5 leases here) and one recovery period later into the pause; a pause of RECOVERY + 8 leases leaves
# it 5.5 leases to start before the wake, and a job of LATE_JOB leases keeps the earliest one running
# 14.5 leases (2.9 s) past it: the woken execution's finish comes first even beside busy loops (with a
# job as long as the pause, its 0.5 s was too short under load). Two such jobs and the pause outlast the
# default deadline: that test sets its own.
LATE_SCALE = 0.2
LATE = RECOVERY + 8
LATE_JOB = LATE + 12


def _status(h) -> dict[str, str]:
    return {name: r.status for name, r in properties.check(h).items()}


def _events(runner, job: int) -> list[str]:
    """procrastinate's own event log of a schedule job (procrastinate_events, written by its triggers),
    read before the next run resets it."""
    return [t for (t,) in runner.admin.execute(
        "select e.type::text from procrastinate_events e join job_map m on m.library_id = e.job_id::text "
        "where m.job_id = %s and e.type <> 'scheduled' order by e.id", [job])]


def test_fault_free_every_job_done_exactly_once(runner, database):
    jobs = tuple(JobSpec(i, tenant=(i % 7) + 1, duration=0.01) for i in range(1, 21))
    h = runner.run(Schedule(jobs=jobs, workers=2, design="procrastinate", time_scale=SCALE))
    assert h.ended_by == "quiescent"
    assert [(j["id"], j["status"], j["attempts"]) for j in h.jobs] == [(i, "done", 1) for i in range(1, 21)]
    assert sorted(r["job_id"] for r in h.runs) == list(range(1, 21))
    execs = h.executions()
    assert Counter(e.job for e in execs) == Counter(range(1, 21))
    assert all(e.outcome == "ok" and e.attempt == 1 for e in execs)
    assert {e.worker for e in execs} <= {"w1.0", "w2.0"}
    # procrastinate's task threads (asgiref) inherit the worker's blocked strike signal: run_job never
    # had to block it again (workers/hosted/protocol.py logs "strike-signal-unblocked" when it does).
    assert not [r for r in h.records if r["event"] == "strike-signal-unblocked"]
    # Every property holds. pool-hygiene judges the body's pool (ctx.pool, the connections the execution
    # log records); procrastinate's own pool (min 1, max 2) and LISTEN connection are named
    # "<worker>/queue" in pg_stat_activity but open no "connect" record.
    assert set(_status(h).values()) == {"held"}, {n: r.evidence for n, r in properties.check(h).items()}
    # procrastinate's own record: one 'succeeded' event per job, each right after its execution returned.
    one_each = properties.check(h)["library-one-finish"].evidence
    assert one_each.startswith("procrastinate accepted 20 finishes for 20 jobs"), one_each


def test_cost_per_job_beside_lease_heartbeat(runner, database):
    # What run.py bench measures (harness/bench/cost.py), in this process: one worker, 20 zero-length jobs.
    from pg_job_chaos.harness.bench.cost import design_cost

    cost = {d: design_cost(runner, database.admin_dsn, database.worker_dsn, d, jobs=20, time_scale=SCALE)
            for d in ("lease-heartbeat", "procrastinate")}
    print("per-job cost at time scale", SCALE, cost)
    assert all(c["jobs"] == 20 for c in cost.values()), cost
    # procrastinate: fetch + finish (its functions), each on a pool connection that psycopg_pool first
    # checks with an empty query -- one transaction more each (psycopg_connector.py:
    # PsycopgConnector._create_pool, check=AsyncConnectionPool.check_connection) -- + the body's two
    # short transactions = 6, plus what its side tasks add while the run lasts (worker heartbeats, the
    # periodic deferrer, the recovery job, register/prune/unregister): measured 6.65-6.75 for 20 jobs on a
    # quiet machine, 8.45 beside a soak and busy loops -- the side tasks tick by the clock, so their share
    # grows with the run's length: only the per-job floor is a guarantee (issue 51). run.py bench prints it.
    assert cost["procrastinate"]["transactions"] >= 6, cost


def test_crash_is_retried_by_the_documented_recovery_past_max_attempts(runner):
    # Job 1 crashes (os._exit(1)) in every execution. procrastinate's RetryStrategy never sees it (no
    # exception reaches worker.py: Worker._process_job); the job stays "doing" under a worker whose
    # heartbeat stops. The next worker's start prunes it (worker.py: Worker.run ->
    # prune_stalled_workers; schema.sql: worker_id ON DELETE SET NULL), and the documented
    # retry_stalled_jobs task requeues it: manager.py: JobManager.retry_job ->
    # procrastinate_retry_job_v2, "SET status = 'todo', attempts = attempts + 1 ... WHERE status IN
    # ('doing', 'failed')" -- with no limit. So it runs again, and again, one worker each time.
    # Each re-run waits for the next recovery tick (up to RECOVERY leases): the deadline allows six.
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="crash"), JobSpec(2)), workers=2, design="procrastinate",
                            time_scale=SCALE, max_attempts=2, restarts=4,
                            timing=Timing(deadline=6 * (RECOVERY + 2))))
    status = _status(h)
    runs1 = [e for e in h.executions() if e.job == 1]
    crashed = [x for x in h.exits if x.outcome == "exit 1"]
    assert h.ended_by == "workers-exhausted"
    assert len(crashed) == 6 and {x.job for x in crashed} == {1}  # 2 workers + 4 restarts, all by job 1
    assert [e.attempt for e in runs1] == list(range(1, 7))  # procrastinate's own count, 1-based: consecutive
    assert h.jobs[1]["status"] == "done"
    assert status["bounded-attempts"] == "violated"  # 6 executions, max_attempts 2
    assert status["bounded-blast-radius"] == "violated"
    assert status["attempts-counted"] == "held"  # the recovery's retry_job counts each crashed one
    assert status["terminal-states"] == "violated"  # the last crash left it "doing"; no worker is left
    assert h.jobs[0]["status"] == "running" and h.jobs[0]["attempts"] == 6
    # procrastinate's events: every requeue is a deferred_for_retry (the recovery's); never "failed".
    events = _events(runner, 1)
    assert events.count("started") == 6 and events.count("deferred_for_retry") == 5
    assert "failed" not in events
    # Those requeues are the recovery's, no execution's finish (each crashed one died in its body):
    # procrastinate took no finish for job 1, one for job 2.
    assert status["library-one-finish"] == "held", properties.check(h)["library-one-finish"].evidence


def test_pause_lets_the_recovery_requeue_a_live_job_and_both_executions_commit(runner):
    # The worker running job 1 is stopped (SIGSTOP) at mid-work for PAUSE leases: its heartbeat (the
    # worker's, not the job's: worker.py: Worker._update_heartbeat) stops with it. get_stalled_jobs
    # (queries.sql: select_stalled_jobs_by_heartbeat) cannot tell a paused worker from a dead one, so the
    # other worker's retry_stalled_jobs requeues the job and runs it (attempt 2) to the end. Nothing
    # tells the paused execution it lost the job: a sync task learns only of abort requests
    # (JobContext.should_abort), and none is made. When it resumes it sends its effect and commits its
    # job_runs row; procrastinate's finish then fails -- procrastinate_finish_job_v1 matches "WHERE id =
    # job_id AND status IN ('todo', 'doing')", by status, not by worker -- after the harm is done.
    # (PAUSE leases, not the default 2: the documented recovery runs every 20 leases, so a shorter
    # pause is caught only when a tick happens to fall inside it.)
    h = runner.run(Schedule(jobs=(JobSpec(1, duration=0.5),), events=(Event("pause", 1, duration=PAUSE),),
                            workers=2, design="procrastinate", time_scale=SCALE))
    status = _status(h)
    paused = next(i for i in h.injected if i["fault"] == "pause")
    resumed = next(i for i in h.injected if i["fault"] == "resume")
    execs = h.executions()
    first, second = execs
    assert first.worker == paused["worker"] and first.attempt == 1
    assert second.worker != paused["worker"] and second.attempt == 2
    assert paused["t"] < second.start < second.end < resumed["t"]  # requeued and done while stopped
    assert first.outcome == second.outcome == "ok"  # the body of each finished
    assert sorted(r["attempt"] for r in h.runs) == [1, 2]  # both job_runs rows committed
    for name in ("no-overlap", "single-commit", "at-most-once-effects", "no-stale-effect"):
        assert status[name] == "violated", (name, properties.check(h)[name].evidence)
    assert status["attempts-counted"] == "held"
    assert h.jobs[0]["status"] == "done" and h.jobs[0]["attempts"] == 2
    # The stale finish was refused by procrastinate_finish_job_v1 (the job was already succeeded).
    assert _events(runner, 1) == ["deferred", "started", "deferred_for_retry", "started", "succeeded"]
    # What procrastinate accepted, from those events: the recovery's requeue (no execution had failed),
    # then the re-run's success; the woken execution's finish raised (sql/schema.sql:289) and left no
    # event. The body-first violations above are at-least-once by design (properties/explain.py): the
    # body committed and sent before the library's finish, which no fence of procrastinate's can undo.
    results = properties.check(h)
    assert results["library-one-finish"].status == "held", results["library-one-finish"].evidence
    assert f"no finish of the stale job 1's {first.worker} attempt 1" in \
        results["library-one-finish"].evidence
    assert {results[n].cause for n in ("single-commit", "at-most-once-effects",
                                       "no-stale-effect")} == {"at-least-once"}


def test_a_woken_executions_finish_is_taken_while_the_re_run_is_doing(runner):
    # The same pause past the heartbeat (two executions of job 1 at once), at before-finish this time
    # -- the work done, its job_runs row not yet committed -- and the job longer than the pause, so the
    # re-run (attempt 2) is still 'doing' when the stopped worker wakes and returns. procrastinate
    # fences a finish by the job's status alone: sql/schema.sql:285 (procrastinate_finish_job_v1)
    # "WHERE id = job_id AND status IN ('todo', 'doing')", never the worker_id its fetch set
    # (schema.sql:255, procrastinate_fetch_job_v2). So it takes the woken, stale execution's success
    # (worker.py:187, Worker._persist_job_status -> JobManager.finish_job) and refuses the re-run's own
    # when it returns (schema.sql:289, "Job was not found or not in "doing" or "todo" status"). A woken
    # execution that raised would be taken as well: procrastinate_retry_job_v2 matches any 'doing' job
    # (schema.sql:393) and puts the re-run's job back to 'todo'.
    h = runner.run(Schedule(jobs=(JobSpec(1, duration=LATE_JOB),), workers=2, design="procrastinate",
                            events=(Event("pause", 1, "before-finish", duration=LATE),),
                            time_scale=LATE_SCALE, timing=Timing(deadline=2 * LATE_JOB + LATE + 20)))
    paused = next(i for i in h.injected if i["fault"] == "pause")
    resumed = next(i for i in h.injected if i["fault"] == "resume")
    first, second = h.executions()
    assert first.worker == paused["worker"] and second.attempt == 2
    assert paused["t"] < second.start < resumed["t"] < first.end < second.end  # both live when it woke
    assert first.outcome == second.outcome == "ok" and sorted(r["attempt"] for r in h.runs) == [1, 2]
    assert _events(runner, 1) == ["deferred", "started", "deferred_for_retry", "started", "succeeded"]
    (succeeded,) = [f for f in h.finishes[0]["finishes"] if f["outcome"] == "success"]
    # the stale one's: the re-run was still running. The finish is dated on the server's clock, read
    # once half a round trip either way, so it may sit up to library.SLACK before the end it follows.
    assert first.end - library.SLACK <= succeeded["t"] < second.end
    results = properties.check(h)
    lib = results["library-one-finish"]
    assert (lib.status, lib.jobs) == ("violated", (1,)), lib.evidence
    assert f"accepted the success (succeeded) of {first.worker} attempt 1" in lib.evidence
    assert f"after {second.worker} attempt 2 had started: a stale execution's finish" in lib.evidence
    assert results["single-commit"].cause == "at-least-once"
    assert "but procrastinate also accepted a finish it should not have" in results["single-commit"].evidence
    assert h.jobs[0]["status"] == "done"


def test_without_the_recovery_a_crashed_job_stays_doing_forever(runner):
    # recovery=off: procrastinate alone. Nothing in its worker requeues a job whose worker died
    # (docs/howto/production/retry_stalled_jobs.md: "these stalled jobs will remain in the queue
    # forever"): the job stays "doing", stalled by procrastinate's own criterion, and is not pending.
    h = runner.run(Schedule(jobs=(JobSpec(1, fault="crash"), JobSpec(2)), workers=2, design="procrastinate",
                            design_options={"recovery": "off"}, time_scale=SCALE, max_attempts=2, restarts=4))
    status = _status(h)
    assert h.ended_by == "quiescent"
    assert [e.attempt for e in h.executions() if e.job == 1] == [1]
    assert h.jobs[0] == {**h.jobs[0], "status": "running", "attempts": 1, "lease_expired": True}
    assert h.jobs[1]["status"] == "done"
    assert status["terminal-states"] == "violated" and status["bounded-attempts"] == "held"
    assert _events(runner, 1) == ["deferred", "started"]


def test_a_worker_pruned_while_paused_dies_on_its_next_fetch(runner):
    # Worker A runs job 1 and is stopped for PAUSE leases. Job 2 crashes every worker that takes it; each
    # replacement starts with Worker.run -> prune_stalled_workers(stalled_worker_timeout), which deletes
    # A's procrastinate_workers row (its heartbeat is stale): schema.sql sets A's jobs' worker_id to NULL
    # (ON DELETE SET NULL). When A resumes, its heartbeat (procrastinate_update_heartbeat_v1: UPDATE ...
    # WHERE id = worker_id) silently matches nothing, and its next fetch (procrastinate_fetch_job_v2:
    # "SET status = 'doing', worker_id = p_worker_id") violates procrastinate_jobs_worker_id_fkey: the
    # exception leaves Worker._fetch_and_process_jobs and Worker.run, and the worker process ends.
    h = runner.run(Schedule(jobs=(JobSpec(1, duration=0.5), JobSpec(2, fault="crash")),
                            events=(Event("pause", 1, duration=PAUSE),), workers=2, design="procrastinate",
                            time_scale=SCALE, max_attempts=1, restarts=2))
    paused = next(i for i in h.injected if i["fault"] == "pause")
    exit_a = next(x for x in h.exits if x.worker == paused["worker"])
    assert exit_a.outcome == "worker error" and not exit_a.by_harness
    error = next(r for r in h.records if r["event"] == "worker-error" and r["worker"] == paused["worker"])
    assert "procrastinate_jobs_worker_id_fkey" in error["traceback"]
    assert "procrastinate_fetch_job_v2" in error["traceback"]
    # and before it died, A finished job 1 beside its re-run (the pause test's zombie)
    assert sorted(e.attempt for e in h.executions() if e.job == 1) == [1, 2]


def test_one_body_at_a_time_procrastinates_default_concurrency(runner):
    """procrastinate runs one job at a time per worker (worker.py:28 WORKER_CONCURRENCY = 1): with the
    body's pool no longer the bound (DesignHandle.pool_size), three jobs of one worker still never
    overlap."""
    jobs = tuple(JobSpec(i, tenant=i, duration=0.2) for i in range(1, 4))
    h = runner.run(Schedule(jobs=jobs, workers=1, design="procrastinate", time_scale=SCALE))
    assert h.ended_by == "quiescent"
    assert Procrastinate().concurrency == 1 and h.schedule.pool_size > 1
    assert overlap.bodies_at_once(h).worker == 1
