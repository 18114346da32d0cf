"""awa (the real library, adapters/awa.py, awa-pg 0.6.9) under the harness, in its default configuration
(queue storage, awa's own insert): fault-free, a transient raise, a crash loop, an overrun and a pause,
each asserting what awa's own code and docs imply (lines of hardbyte/awa v0.6.5; 0.6.9 behaves so,
measured) -- and the canonical-storage finding, under ``storage=canonical``:

- every claim draws a new ``run_lease``; completion, failure and rescue take the attempt by
  ``(job_id, run_lease)`` (docs/architecture.md: stale completions "lose after rescue"): awa accepts at
  most one success per job and none from a replaced run -- ``library-one-finish`` held under every fault,
  but for one race: a completion that commits while the leader's rescue statement runs is accepted and
  the job rescued and run again, two successes
  (docs/findings/libraries/awa-rescue-accepts-raced-completion.md);
- a raise is ``retryable`` at ``now() + 2^attempt s`` (queue_storage.rs:12877, ``fail_retryable_in_tx``);
- the heartbeat rescue makes a stale job ``retryable`` whatever its attempt (queue_storage.rs:12922;
  the handler path checks it at :12896): a job that kills its worker every time is claimed again past
  ``max_attempts`` -- docs/findings/libraries/awa-rescue-max-attempts.md;
- heartbeats land (``attempt_state``) in queue storage: a live overrun job keeps its claim; a paused
  maintenance leader freezes every rescue (its advisory lock stays held);
- in canonical storage they do not (client.rs:1578-1580): docs/findings/libraries/awa-canonical-heartbeat.md.
"""

from __future__ import annotations

import pytest

pytest.importorskip("awa", reason="awa-pg is not installed (pip install -e '.[libraries]')")

from pg_job_chaos.adapters.awa import Awa  # noqa: E402
from pg_job_chaos.core import overlap  # noqa: E402
from pg_job_chaos.core.schedule import Event, JobSpec, Timing  # noqa: E402
from tests.hosted_runs import run_hosted  # noqa: E402

pytestmark = [pytest.mark.chaos]

DESIGN = "pg_job_chaos.adapters.awa:Awa"
SCALE = Awa.min_time_scale  # 0.36: the 250 ms promote interval at 1 ms (adapters/awa.py)
CORRECT = ("tenant-isolation", "done-means-committed", "attempts-counted", "pool-hygiene",
           "library-one-finish")


def _run(runner, jobs, **kw):
    return run_hosted(runner, DESIGN, SCALE, jobs, **kw)


def _rescues(h, job: int) -> list[str]:
    """awa's rescues of a schedule job, as its errors record them (the adapter's accepted_finishes: a job
    running on a receipt claim is not in awa.jobs, its errors are on its newest ready row)."""
    (entry,) = [e for e in h.finishes if e["job"] == job]
    return [f["what"] for f in entry["finishes"] if f["outcome"] == "requeued"]


def _held(r, *names):
    for name in names:
        assert r[name].status == "held", (name, r[name].evidence)


def test_fault_free_every_job_done_once_in_queue_storage(runner):
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=0.01) for i in range(1, 7)])
    assert h.ended_by == "quiescent"
    assert runner.admin.execute(
        "select state, current_engine from awa.storage_transition_state").fetchone() == (
        "active", "queue_storage")  # the first runtime's fresh-install switch (client.rs:1334-1367)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)] * 6
    assert sorted(x["job_id"] for x in h.runs) == list(range(1, 7))
    assert [[f["outcome"] for f in e["finishes"]] for e in h.finishes] == [["success"]] * 6
    _held(r, *CORRECT, "single-commit", "at-most-once-effects", "no-overlap", "bounded-attempts", "progress",
          "terminal-states")


def test_a_transient_raise_is_retried_after_awas_backoff(runner):
    """queue_storage.rs:12877: retryable at now() + backoff(1) = 2-2.5 s, real at any time scale; awa
    records the failure (errors[0], attempt 1) and then one success."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="raise", strikes=1)], workers=1)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
    first, second = h.executions()
    assert (first.attempt, second.attempt) == (1, 2)  # job.attempt, as the claim counts it
    assert second.start - first.end >= 1.9  # 2^1 s, less the clock's grain
    assert [(f["outcome"], f["attempt"]) for f in h.finishes[0]["finishes"]] == [("failure", 1),
                                                                                 ("success", 2)]
    _held(r, *CORRECT, "transient-recovers", "single-commit")


def test_a_crash_loop_is_rescued_past_max_attempts(runner):
    """Job 1 kills its worker on every execution. The stale-receipt rescue (or the deadline's) makes it
    retryable whatever its attempt (queue_storage.rs:13046-13051, 13140-13145; the heartbeat rescue,
    :12922, is the same), so it is claimed until the restart budget is spent: 2 workers + 1 restart = 3
    executions of a job whose max_attempts is 2, each counted; awa accepted no finish for it.

    The run ends by itself when the third worker dies; the stall limit is only the harness's patience
    between records (a restarted worker's start, awa's 4-5 s retry backoff, a rescue), given room here
    because beside two busy loops the default (about 13 s) once ran out first (issue 51)."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=0.05, fault="crash", point="mid-work")],
                max_attempts=2, restarts=1, timing=Timing(stall=150.0, deadline=300.0))
    assert h.ended_by == "workers-exhausted"
    ones = h.executions()
    assert [e.attempt for e in ones] == [1, 2, 3] and len({e.worker for e in ones}) == 3
    (state,) = h.jobs
    assert state["attempts"] == 3 and state["status"] in ("running", "queued")
    rescues = _rescues(h, 1)  # the stale-receipt rescue, or the deadline's when it comes first
    assert len(rescues) >= 2 and all(w.startswith(("receipt claim stale", "hard deadline exceeded"))
                                     for w in rescues)
    assert "success" not in {f["outcome"] for f in h.finishes[0]["finishes"]}
    assert "job 1 executed 3 times (max_attempts 2)" in r["bounded-attempts"].evidence
    _held(r, "attempts-counted", "library-one-finish", "tenant-isolation")


def test_an_overrun_keeps_its_claim(runner):
    """The body works 1.5 leases (heartbeat_staleness) on a live worker: its heartbeats land in
    attempt_state, the rescue leaves it alone, it runs once and awa takes its one success. At time scale 1,
    not awa's least 0.36: a heartbeat late by more than its staleness less its interval (0.24 s at 0.36,
    0.67 s here) would have the live job rescued, which beside busy loops is the machine, not awa."""
    h, r = run_hosted(runner, DESIGN, 1.0, [JobSpec(1, tenant=1, fault="overrun"),
                                           JobSpec(2, tenant=2, duration=0.01)])
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1), ("done", 1)]
    assert [e.attempt for e in h.executions() if e.job == 1] == [1]
    _held(r, *CORRECT, "single-commit", "no-overlap", "no-stale-effect", "bounded-attempts")


def test_a_pause_gets_one_finish_accepted_but_for_the_rescues_race(runner):
    """The job's worker is stopped for 3 leases mid-work. When it is awa's maintenance leader (its
    advisory lock frozen with it) nothing is rescued and the job runs once; when it is not, the leader
    rescues the job, the other worker runs it, and the woken worker's completion carries a replaced
    run_lease: refused. Either way awa accepts one success, never a stale one -- but when the woken worker's
    completion commits while the leader's rescue statement runs (its snapshot taken before, its lock
    after): then awa accepts both, its bug (awa-rescue-accepts-raced-completion.md; seen once in about 15
    stressed suite runs, issue 51's run 13), and ``library-one-finish`` must say so."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=0.05)],
                events=(Event("pause", 1, "mid-work", duration=3.0),))
    assert [i["fault"] for i in h.injected][:1] == ["pause"]
    assert [j["status"] for j in h.jobs] == ["done"], (h.jobs, h.finishes)
    outcomes = [f["outcome"] for f in h.finishes[0]["finishes"]]
    if outcomes.count("success") == 1:
        _held(r, "library-one-finish")
    else:  # the race: a rescue of the first run, then both runs' completions accepted
        assert outcomes.count("success") == 2 and _rescues(h, 1), h.finishes
        assert r["library-one-finish"].status == "violated", r["library-one-finish"].evidence
    _held(r, "tenant-isolation", "attempts-counted", "done-means-committed")


def test_canonical_storage_rescues_a_live_overrun(runner):
    """storage=canonical: the jobs queued before any worker started. The heartbeat service writes to
    the builder's queue storage (client.rs:1578-1580), never to awa.jobs: the rescue takes the live job
    as dead and the same worker claims it again while the first run still works -- two executions at once
    (awa's max_workers 50; the body's pool has room for both, DesignHandle.pool_size); the first run's
    finish is fenced off (run_lease). A dequeue budget of 2 ends the run (awa would re-run it until the
    deadline).

    A job of 2.5 leases at time scale 1, not an overrun (1.5 leases) at 0.36: the rescue comes one
    staleness plus up to a rescue interval into the job (1.0-1.33 s), and the re-run must start before
    the first run ends -- 0.02-0.14 s to spare at 0.36 (a stall beside busy loops loses it), 1.2 s here,
    still within awa's deadline (3.33 leases)."""
    h, r = run_hosted(runner, DESIGN, 1.0, [JobSpec(1, tenant=1, duration=2.5)], workers=1, dequeues=2,
                      restarts=0, design_options={"storage": "canonical"})
    ones = h.executions()
    assert [e.attempt for e in ones][:2] == [1, 2] and {e.worker for e in ones} == {"w1.0"}
    assert "heartbeat stale: worker presumed dead" in _rescues(h, 1)
    first, second = ones[:2]
    assert second.start < first.end  # the rescue's claim of a live job: both bodies run and commit
    assert r["no-overlap"].status == "violated", r["no-overlap"].evidence
    assert "job 1: w1.0 attempt 1 and w1.0 attempt 2 ran at once" in r["no-overlap"].evidence
    assert r["single-commit"].status == "violated" and r["single-commit"].cause == "at-least-once"
    _held(r, "tenant-isolation", "library-one-finish")


def test_bodies_run_at_awas_max_workers(runner):
    """awa's queue runs up to max_workers 50 jobs at once (dispatcher.rs:156): eight jobs of one worker all
    run at once, on a body pool sized to them and as many threads (workers/hosted/protocol.py)."""
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=2.0) for i in range(1, 9)], workers=1)
    assert h.ended_by == "quiescent"
    assert Awa().concurrency == 50
    assert overlap.bodies_at_once(h).worker == 8
    _held(r, *CORRECT, "single-commit", "no-overlap")
