"""pg-boss (the real library, Node, adapters/pgboss.py through the worker contract) under the harness:
fault-free, a transient raise, a crash and an overrun, each asserting what pg-boss's own code implies
(pg-boss 10.4.2, workers/clients/node/node_modules/pg-boss/src); a crash after the body's commit on both
finish paths (``--design-option finish=transaction``: fetch() and complete(.., {db}) in the body's
transaction), and the transaction path fault-free:

- plans.js ``fetchNextJob``: ``retry_count + 1`` on every fetch after the first """ \
  """(the attempt the body is told);
- manager.js ``watch``: the handler runs under ``resolveWithinSeconds(.., expireInSeconds)``; past it the
  job is failed (retried while attempts remain) and the handler is not stopped;
- boss.js ``maintain`` -> ``failJobsByTimeout``: an active job past its expiration is retried or failed.

Budget: about 60 s on this machine (seven runs at time scale 1, the least pg-boss's whole-second
expiration allows)."""

from __future__ import annotations

import pytest

from pg_job_chaos.adapters.pgboss import PgBoss
from pg_job_chaos.core import overlap
from pg_job_chaos.core.schedule import JobSpec
from tests.hosted_runs import (
    crash_after_commit_kept_once,
    fault_free_every_job_done_once,
    node_missing,
    run_hosted,
)
from tests.hosted_runs import violated as _violated

pytestmark = [pytest.mark.chaos]

if (missing := node_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

SCALE = PgBoss.min_time_scale  # 1: the whole-second expiration is the lease


def _run(runner, jobs, **kw):
    return run_hosted(runner, "pg-boss", SCALE, jobs, **kw)


def test_fault_free_every_job_done_once(runner):
    h, r = fault_free_every_job_done_once(runner, "pg-boss", SCALE)
    # pg-boss's own record (the descriptor's accepted_finishes): one completion a job, never a second or a
    # stale one. Held, or unknown when a completion is dated more than SLACK (5 ms) before the end of the
    # body it follows: seen once under a loaded suite (issue 51), where the Node client's finished record
    # and the server's clock read can fall that far apart; which of the two is the machine's timing.
    one = r["library-one-finish"]
    assert one.status in ("held", "unknown"), one.evidence
    if one.status == "unknown":
        assert "that no execution of the job explains" in one.evidence, one.evidence


def test_a_transient_raise_is_retried_to_done(runner):
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="raise", strikes=1)], workers=1)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
    assert [e.attempt for e in h.executions()] == [1, 2]  # retryCount + 1, as pg-boss counts
    assert r["transient-recovers"].status == "held" and r["done-means-committed"].status == "held"
    # pg-boss keeps its last finish only: the completion, the retry's (the failure it retried left no row)
    assert [(f["outcome"], f["attempt"]) for f in h.finishes[0]["finishes"]] == [("success", 2)]


def test_a_crashing_job_comes_back_by_expiration_and_ends_failed(runner):
    """No heartbeat: the job of a dead worker stays active until maintenance finds it past its
    expiration (failJobsByTimeout), then it is retried -- counted -- until retry_limit, then failed."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="crash")], max_attempts=2, restarts=2)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("dead", 2)]
    assert len(h.executions()) == 2
    assert {"bounded-attempts", "terminal-states", "attempts-counted"}.isdisjoint(_violated(r))


def test_an_overrun_runs_twice_at_once(runner):
    """Past its expiration the handler is failed and retried but not stopped: two executions of the
    job at once, both committing -- pg-boss's at-least-once, found without luck.

    A job of three leases, not an overrun (1.5): the retry starts about a lease in (the expiration, a
    fail, a fetch) and must start before the first body ends -- ~0.45 s to spare with an overrun, ~2 s
    here."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=3.0)])
    assert "no-overlap" in _violated(r), r["no-overlap"].evidence
    assert r["tenant-isolation"].status == "held"
    # the job ends failed by pg-boss's own timeout (watch's resolveWithinSeconds; the late handler's
    # result is dropped, never completed), a failure no execution raised: the property cannot attribute
    # it and says unknown rather than guess
    lof = r["library-one-finish"]
    assert lof.status == "unknown" and "no execution of the job explains" in lof.evidence, lof.evidence


@pytest.mark.parametrize("finish", ["work", "transaction"])
def test_a_crash_after_the_bodys_commit(runner, finish):
    """Job 1 kills its worker once at ``after-insert``, after the body's ``job_runs`` row committed.
    finish=work: the job stays active until maintenance finds it expired (failJobsByTimeout) and
    retries it -- a second row. finish=transaction: complete(.., {db}) committed with the row
    (adapters/node/pg-boss.js fetchAndComplete), so the job is completed and never runs again."""
    h, r = _run(runner, [JobSpec(1, tenant=1, duration=0.05, fault="crash", point="after-insert", strikes=1)],
                workers=1, restarts=2, design_options={"finish": finish})
    assert h.ended_by == "quiescent"
    rows = sorted((x["worker"], x["attempt"]) for x in h.runs)
    if finish == "work":
        assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
        assert rows == [("w1.0", 1), ("w1.1", 2)]
        assert r["single-commit"].status == "violated", r["single-commit"].evidence
    else:
        crash_after_commit_kept_once(h, r)
        # The completion committed inside the execution that then crashed: no finished execution
        # explains it (properties/library.py; a limitation, reported).
        assert r["library-one-finish"].status == "unknown", r["library-one-finish"].evidence
        assert "that no execution of the job explains" in r["library-one-finish"].evidence


def test_the_transaction_path_fault_free_and_a_transient_raise(runner):
    """Four jobs done once; job 5 raises once: its transaction rolls back, fail() retries it, done."""
    h, r = _run(runner, [*(JobSpec(i, tenant=i, duration=0.01) for i in range(1, 5)),
                         JobSpec(5, tenant=5, fault="raise", strikes=1)],
                design_options={"finish": "transaction"})
    assert h.ended_by == "quiescent"
    assert sorted((j["id"], j["status"], j["attempts"]) for j in h.jobs) == [
        (1, "done", 1), (2, "done", 1), (3, "done", 1), (4, "done", 1), (5, "done", 2)]
    assert sorted((x["job_id"], x["attempt"]) for x in h.runs) == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2)]
    # completeJobs dates the completion now(): the finishing transaction's start, before the body that
    # commits it ends -- a body ending more than SLACK (5 ms) later leaves it unexplained
    # (properties/library.py): unknown, a limitation; one ending sooner is attributed, held. Which of
    # the two is the machine's timing (held in 2 of 8 runs before issue 36's speed work, 3 of 8 after).
    one = r["library-one-finish"]
    assert one.status in ("unknown", "held"), one.evidence
    if one.status == "unknown":
        assert "that no execution of the job explains" in one.evidence, one.evidence
    assert _violated(r) == set(), {n: x.evidence for n, x in r.items() if x.status == "violated"}


def test_one_body_at_a_time_when_none_overruns(runner):
    """work(name, handler): batchSize 1 (attorney.js:135), one fetch handled at a time -- three jobs of one
    worker never overlap while none outlives its expiration."""
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=0.2) for i in range(1, 4)], workers=1)
    assert h.ended_by == "quiescent"
    assert PgBoss.concurrency == 1 and h.schedule.pool_size > 1
    assert overlap.bodies_at_once(h).worker == 1
