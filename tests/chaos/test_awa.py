"""awa (the real library, adapters/awa.py, awa-pg 0.6.9) under the harness, in its default configuration
(queue storage, awa's own insert): fault-free, a transient raise, a crash loop, an overrun and a pause,
each asserting what awa's own code and docs imply (lines of hardbyte/awa v0.6.5; 0.6.9 behaves so,
measured) -- and the canonical-storage finding, under ``storage=canonical``:

- every claim draws a new ``run_lease``; completion, failure and rescue take the attempt by
  ``(job_id, run_lease)`` (docs/architecture.md: stale completions "lose after rescue"): awa accepts at
  most one success per job and none from a replaced run -- ``library-one-finish`` held under every fault,
  but for one race: a completion that commits while the leader's rescue statement runs is accepted and
  the job rescued and run again, two successes
  (docs/findings/libraries/awa-rescue-accepts-raced-completion.md; forced by the last test, with its
  control);
- a raise is ``retryable`` at ``now() + 2^attempt s`` (queue_storage.rs:12877, ``fail_retryable_in_tx``);
- the heartbeat rescue makes a stale job ``retryable`` whatever its attempt (queue_storage.rs:12922;
  the handler path checks it at :12896): a job that kills its worker every time is claimed again past
  ``max_attempts`` -- docs/findings/libraries/awa-rescue-max-attempts.md;
- heartbeats land (``attempt_state``) in queue storage: a live overrun job keeps its claim; a paused
  maintenance leader freezes every rescue (its advisory lock stays held);
- in canonical storage they do not (client.rs:1578-1580): docs/findings/libraries/awa-canonical-heartbeat.md.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

pytest.importorskip("awa", reason="awa-pg is not installed (pip install -e '.[libraries]')")

from pg_job_chaos.adapters.awa import Awa  # noqa: E402
from pg_job_chaos.adapters.awa import url as awa_url  # noqa: E402
from pg_job_chaos.core import overlap, sqlfile  # noqa: E402
from pg_job_chaos.core.procs import die_with_parent  # noqa: E402
from pg_job_chaos.core.schedule import Event, JobSpec, Timing  # noqa: E402
from pg_job_chaos.workers.hosted.declared import admin_dsn  # noqa: E402
from tests.awa_race_worker import STALENESS_MS  # noqa: E402
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


# --- awa's stale-receipt rescue against a completion committed while its statement waits -------------
# docs/findings/libraries/awa-rescue-accepts-raced-completion.md. Real awa runtimes
# (tests/awa_race_worker.py): a maintenance leader L and the job's worker W, processes of their own.
RACE = sqlfile.load(__file__, "awa_race.sql", "claim", "hold_slot", "rescue_blocked", "cancel",
                    "stale_since", "completion_committed", "rescue_committed", "states", "evidence")
RACE_WORKER = Path(__file__).resolve().parents[1] / "awa_race_worker.py"
RACE_STALENESS = STALENESS_MS / 1000  # the leader's heartbeat staleness, in seconds
PATIENCE = 90.0  # seconds any one condition may take beside busy loops; a pass takes 1-3 s of them


def _until(what: str, condition, timeout: float = PATIENCE, detail=lambda: ""):
    """*condition*'s first truthy value, polled every 20 ms; after *timeout* an AssertionError naming
    *what*, with *detail()*."""
    end = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout:.0f} s: {what}; {detail()}")
        time.sleep(0.02)
    return value


def _race(admin, dsn: str, url: str, queue: str, flags: Path, n: int, *,
          completion_first: bool) -> tuple[list, list]:
    """Run job *n* on W once, with the leader's rescue statement held after its snapshot: the
    completion committed while it waits (*completion_first*) or the rescue committed first. awa's rows of
    the job once its re-run completed, and its evidence."""
    def one(name: str, **params):
        return admin.execute(getattr(RACE, name), params).fetchone()

    def until(what: str, condition):  # a timeout says what awa holds of the job
        return _until(what, condition, detail=lambda: f"awa.jobs {_states(admin, job)}, records "
                      f"{admin.execute(RACE.evidence, {'job': job}).fetchall()}")

    out = subprocess.run([sys.executable, str(RACE_WORKER), "insert", url, queue, str(n)], check=True,
                         capture_output=True, text=True, timeout=PATIENCE)
    job = int(out.stdout.split()[-1])
    held = psycopg.connect(dsn)  # opened first: the row is held the moment W's claim shows
    try:
        until("W starts the job", lambda: (flags / f"started.{n}.1").exists())
        slot, run_lease, since = until("W's claim row", lambda: one("claim", job=job))
        assert run_lease == 1
        # 1. Hold the claim's slot row. From now on every rescue statement of the leader waits on it in its
        #    first CTE (cursor_row), its snapshot taken: none can rescue the job until the row is let go.
        held.execute(RACE.hold_slot, {"slot": slot})
        assert not one("rescue_committed", job=job, run_lease=1), "rescued before the test held its row"
        # 2. Wait until the claim is stale by the rescue's own measure, and until the statement waiting there
        #    began its transaction after that: its cutoff (now() - staleness, read after its BEGIN) then
        #    passes the claim. A statement begun earlier may have a cutoff short of it: it is cancelled, its
        #    transaction rolled back with nothing written, and the leader's next tick (200 ms) starts anew.
        stale_at = since + timedelta(seconds=RACE_STALENESS)
        until("the claim is stale", lambda: one("stale_since", since=since, secs=RACE_STALENESS + 0.2)[0])

        holder = held.info.backend_pid

        def rescue_begun_stale():
            r = one("rescue_blocked", holder=holder)
            if r is None or r[2] > stale_at:
                return r
            one("cancel", pid=r[0])
            until("the early statement ends", lambda: one("rescue_blocked", holder=holder) != r)
            return None

        rescue = until("a rescue begun after the claim went stale waits on the row", rescue_begun_stale)
        if completion_first:
            # 3a. W returns; its completion takes the advisory lock the rescue will try only later
            #     (queue_storage.rs:5913-5927), finds no closure and commits while the rescue waits.
            (flags / f"finish.{n}").touch()
            until("W's completion commits", lambda: one("completion_committed", job=job, run_lease=1))
            assert one("rescue_blocked", holder=holder) == rescue, "the rescue stopped waiting"
            held.commit()  # the rescue runs on its snapshot: the claim stale and open, the advisory lock free
            until("the rescue commits", lambda: one("rescue_committed", job=job, run_lease=1))
        else:
            # 3b. The control: the rescue runs and commits first, then W returns; its completion is refused
            #     (the rescue's closure names its run_lease).
            held.commit()
            until("the rescue commits", lambda: one("rescue_committed", job=job, run_lease=1))
            (flags / f"finish.{n}").touch()
        until("W's attempt 1 returns", lambda: (flags / f"returning.{n}.1").exists())
        # 4. The rescue made the job retryable (2^1 s of backoff): W runs it again and awa completes it.
        until("the re-run's completion", lambda: ("completed", 2) in _states(admin, job))
        return _states(admin, job), admin.execute(RACE.evidence, {"job": job}).fetchall()
    finally:
        held.close()  # its transaction, if still open, rolled back: the slot's row let go


def _states(admin, job: int) -> list[tuple]:
    """awa's rows of the job: (state, run_lease), one per run."""
    return [tuple(r) for r in admin.execute(RACE.states, {"job": job})]


def test_awas_rescue_accepts_a_completion_committed_while_its_statement_waits(runner, tmp_path):
    """awa's bug, forced (docs/findings/libraries/awa-rescue-accepts-raced-completion.md). A job's worker W
    holds its receipt claim without a heartbeat; the maintenance leader L (a 2 s staleness, a rescue every
    200 ms) comes to rescue it. The test holds the claim's ``awa.claim_ring_slots`` row so that L's rescue
    statement waits there -- its snapshot taken, the claim stale and open in it, its advisory try-lock
    (queue_storage.rs:10139) not yet reached -- and lets W's body return:

    - **the race**: W's completion (advisory lock first, then closure evidence written to
      ``lease_claim_closure_batches`` and ``receipt_completion_batches``, the claim row untouched) commits
      while the rescue statement waits; released, the rescue closes the same run as ``rescued`` and makes
      the job retryable; W runs it again and awa completes that too: ``awa.jobs`` shows two
      ``completed`` rows of the job, run_leases 1 and 2 -- two accepted successes;
    - **the control**: the rescue commits first, then W returns: its completion is refused, and the
      re-run's is the one success (one ``completed`` row, run_lease 2).

    The rescue statement held is one whose transaction began after the claim went stale (its cutoff past
    the claim); one begun earlier is cancelled while it waits (nothing written, the leader's next tick
    starts anew). Each step waits on a condition read from the database or W's flag files, never on a
    time; awa's leader sometimes starts no rescue for 20 s (why is not established: its maintenance loop
    runs one branch at a time), hence the patience."""
    _run(runner, [JobSpec(1, tenant=1, duration=0.01)])  # awa installed and in queue storage, as any run
    admin = runner.admin
    dsn = admin_dsn(admin)
    url = awa_url(dsn)
    queue = f"race_{secrets.token_hex(3)}"
    parent = os.getpid()
    procs = []
    try:
        for role in ("leader", "worker"):  # L first, until it leads: W never runs an election against it
            procs.append(subprocess.Popen(
                [sys.executable, str(RACE_WORKER), role, url, queue if role == "worker" else f"{queue}_idle",
                 str(tmp_path)],
                preexec_fn=lambda: die_with_parent(signal.SIGKILL, parent)))  # gone with pytest, even killed
            health = tmp_path / f"{role}.health"
            _until(f"{role} up and, L, awa's maintenance leader", lambda h=health, r=role: h.exists() and (
                r == "worker" or json.loads(h.read_text())["leader"]))
        race, race_evidence = _race(admin, dsn, url, queue, tmp_path, 1, completion_first=True)
        control, control_evidence = _race(admin, dsn, url, queue, tmp_path, 2, completion_first=False)
        for name, rows, records in (("race", race, race_evidence), ("control", control, control_evidence)):
            print(f"{name}: awa.jobs {rows}", *(f"  {at:%H:%M:%S.%f} {what} run_lease {lease}"
                                                for what, lease, at in records), sep="\n")  # seen with -s
        assert race == [("completed", 1), ("completed", 2)], race_evidence
        assert {(r[0], r[1]) for r in race_evidence} >= {
            ("receipt_completion_batches", 1), ("lease_claim_closures rescued", 1)}, race_evidence
        assert control == [("completed", 2)], control_evidence
        assert ("receipt_completion_batches", 1) not in {(r[0], r[1]) for r in control_evidence}, \
            control_evidence
    finally:
        (tmp_path / "stop").touch()  # awa's own shutdown; a process that outlasts it is killed
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
