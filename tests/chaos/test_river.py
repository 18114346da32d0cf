"""River (the real library, Go, adapters/river.py through the worker contract's Go client) under the
harness: fault-free, an overrun, and a crash after the body's commit on both finish paths, each asserting
what River's own code implies (v0.51.2):

- ``internal/jobexecutor/job_executor.go``: ``JobTimeout`` cancels the job's context; the body's statements
  run under it, so a body past it fails at its finishing statement and River retries it;
- ``internal/maintenance/job_rescuer.go``: the leader's rescuer retries a job ``running`` longer than
  ``RescueStuckJobsAfter`` -- how the job of a dead worker comes back, never sooner;
- ``job_complete_tx.go``: ``JobCompleteTx`` completes the job in the body's finishing transaction;
- ``client.go``: ``Client.Stop`` stops fetching and waits for the jobs in hand -- reached from a deploy's
  SIGTERM through the Go client's handler (``MayDequeue`` false), as River's own examples stop on it.

``library-one-finish`` and ``success-final`` are judged from River's own record (``river.sql``'s trigger:
adapters/river.py). Not here: a run where River takes a stale execution's finish. It needs a worker stopped
past ``RescueStuckJobsAfter`` and woken while the re-run is still live; the re-run starts a rescuer tick
(fixed 30 s), a dead leader's TTL and a scheduler tick (5 s) after the threshold, so only a second pause of
the re-run's worker, overlapping the first by that spread (about a minute of real time each), would make the
order fixed -- past this file's budget.

Budget: about 45 s on this machine (three runs at time scale 1, a few seconds each; the crash on the default
path at time scale 0.2 waits for the rescuer, whose period and a dead leader's TTL are River's constants:
20-30 s)."""

from __future__ import annotations

import pytest

from pg_job_chaos.adapters.river import TIMING
from pg_job_chaos.core.schedule import JobSpec
from pg_job_chaos.properties import library
from pg_job_chaos.workers.hosted import golang
from tests.hosted_runs import (
    crash_after_commit_kept_once,
    deploy_finishes_the_job_in_hand,
    fault_free_every_job_done_once,
    run_hosted,
)

pytestmark = [pytest.mark.chaos]

if (missing := golang.missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

# Time scale 1: the lease (River's JobTimeout) is 1 s, far above a body's few milliseconds on a loaded
# machine. The crash on the default path runs at RESCUE_SCALE instead, so that the rescue
# (RescueStuckJobsAfter, 60 leases) comes within a test's budget: there a body gets 0.2 s.
SCALE = 1.0
RESCUE_SCALE = 0.2


def _run(runner, jobs, scale=SCALE, **kw):
    return run_hosted(runner, "river", scale, jobs, **kw)


def test_fault_free_every_job_done_once(runner):
    """Every job done once, and River's own record judged: one success each, through the completer, dated
    at its UPDATE on the server's clock (river.sql's trigger), after the body that returned."""
    h, r = fault_free_every_job_done_once(runner, "river", SCALE)
    for name in ("library-one-finish", "success-final"):
        assert r[name].status == "held", (name, r[name].evidence)
    assert "river accepted 8 finishes for 8 jobs" in r["library-one-finish"].evidence
    for entry in h.finishes:
        (success,) = entry["finishes"]
        assert (success["outcome"], success["what"], success["clock"]) == \
            ("success", "completed (completer)", "database"), entry
        (ex,) = [e for e in h.executions() if e.job == entry["job"]]
        assert ex.end - library.SLACK <= success["t"], (entry, ex.end)


def test_a_transient_raise_gets_two_finishes_accepted_and_judged(runner):
    """Job 1 raises at ``mid-work`` once: River appends the error (attempt 1) and makes the job available
    after its 1 s backoff; attempt 2 succeeds. River accepted two finishes, each dated at its UPDATE (the
    trigger's clock_timestamp()), a failure and then a success, each attributed to the execution that
    returned last before it with that outcome: ``library-one-finish`` and ``success-final`` judged, held."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=0.05, fault="raise", strikes=1)], workers=1,
                max_attempts=3)
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
    first, second = h.executions()
    assert (first.attempt, first.outcome, second.attempt, second.outcome) == (1, "fail", 2, "ok")
    (entry,) = h.finishes
    assert [(f["outcome"], f["what"], f["attempt"]) for f in entry["finishes"]] == \
        [("failure", "errored -> available", 1), ("success", "completed (completer)", None)], entry
    failure, success = entry["finishes"]
    assert first.end - library.SLACK <= failure["t"] < second.start
    assert second.end - library.SLACK <= success["t"]
    lib = r["library-one-finish"]
    assert lib.status == "held", lib.evidence
    assert "river accepted 2 finishes for 1 job" in lib.evidence, lib.evidence
    assert r["success-final"].status == "held", r["success-final"].evidence


def test_an_overrun_is_cut_by_the_job_timeout_and_retried(runner):
    """The work lasts 1.5 leases, the lease is River's JobTimeout: the job's context is cancelled
    before the body's finishing transaction, which fails; River retries (attempt^4 s) until
    MaxAttempts, then discards. Every attempt's effect was sent, none committed its row."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="overrun")], workers=1, max_attempts=2)
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("dead", 2)]
    exs = h.executions()
    assert [e.attempt for e in exs] == [1, 2]
    assert all(e.outcome == "fail" and "deadline exceeded" in (e.error or "") for e in exs), \
        [(e.outcome, e.error) for e in exs]
    assert all(e.effects == 1 for e in exs) and h.runs == []
    assert r["at-most-once-effects"].status == "violated", r["at-most-once-effects"].evidence
    assert r["tenant-isolation"].status == "held"


@pytest.mark.parametrize("finish", ["work", "transaction"])
def test_a_crash_after_the_bodys_commit(runner, finish):
    """Job 1 kills its only worker once at ``after-insert``, after the body's ``job_runs`` row committed.
    finish=work: the job stays running; once the replacement is leader, its rescuer retries it -- not
    before RescueStuckJobsAfter (scaled) from the first start -- and it runs again: a second row.
    finish=transaction: JobCompleteTx committed with the row, so it is completed and never runs again."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=0.05, fault="crash", point="after-insert", strikes=1)],
                scale=RESCUE_SCALE if finish == "work" else SCALE, workers=1, restarts=1,
                design_options={"finish": finish})
    assert h.ended_by == "quiescent"
    rows = sorted((x["worker"], x["attempt"]) for x in h.runs)
    if finish == "work":
        assert [j["status"] for j in h.jobs] == ["done"]
        assert rows[:2] == [("w1.0", 1), ("w1.1", 2)]
        first, second = h.executions()[:2]
        rescue_after = TIMING.values(h.schedule)["rescue stuck jobs after"]  # 60 leases: 12 s
        assert second.start - first.start >= rescue_after, (second.start - first.start, rescue_after)
        assert r["single-commit"].status == "violated", r["single-commit"].evidence
        # River's record: attempt 2's completion; nothing of attempt 1's, whose process died before its
        # completer flushed. The rescue between them is River's recovery, no execution's finish: counted in
        # the record's text, not attributed (river.sql)
        (entry,) = h.finishes
        assert [(f["outcome"], f["what"], f["attempt"]) for f in entry["finishes"]] == \
            [("success", "completed (completer)", None)], entry
        assert "retryable #1 (rescued)" in entry["recorded"], entry
    else:
        crash_after_commit_kept_once(h, r)
        # JobCompleteTx's UPDATE ran in the body's finishing transaction: attributed by that transaction's
        # job_runs row (attempt 1), undated -- so success-final has no date to judge from
        (entry,) = h.finishes
        assert [(f["outcome"], f["what"], f["attempt"], f["t"]) for f in entry["finishes"]] == \
            [("success", "completed (JobCompleteTx)", 1, None)], entry
        assert r["success-final"].status == "unknown", r["success-final"].evidence
        # ... to attempt 1's execution, which never ended ok (its worker died at after-insert): the success
        # is one no execution explains, so library-one-finish cannot decide (properties/library.py)
        lib = r["library-one-finish"]
        assert lib.status == "unknown", lib.evidence
        assert "that no execution of the job explains" in lib.evidence, lib.evidence
        return
    assert r["library-one-finish"].status == "held", r["library-one-finish"].evidence


def test_a_deploys_sigterm_lets_the_job_in_hand_finish_through_stop(runner):
    """SIGTERM mid-work (a rolling deploy): the Go client's handler makes MayDequeue false and River's
    ``Client.Stop`` waits for the job in hand, which finishes and is completed once; the worker exits by
    itself within the grace (30 s, scaled), and its replacement runs the rest. Before the handler, Go's
    default action ended the process at once (exit 143) and the job waited for the rescuer."""
    # 0.2 of River's 1-lease JobTimeout, not half: the strike's round trip and a stall beside busy loops
    # must not carry the job past it
    deploy_finishes_the_job_in_hand(runner, "river", SCALE, duration=0.2)
