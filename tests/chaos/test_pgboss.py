"""pg-boss (the real library, Node, adapters/pgboss.py through the worker contract) under the harness:
fault-free, a transient raise, a crash and an overrun, each asserting what pg-boss's own code implies
(pg-boss 10.4.2, workers/clients/node/node_modules/pg-boss/src):

- plans.js ``fetchNextJob``: ``retry_count + 1`` on every fetch after the first """ \
  """(the attempt the body is told);
- manager.js ``watch``: the handler runs under ``resolveWithinSeconds(.., expireInSeconds)``; past it the
  job is failed (retried while attempts remain) and the handler is not stopped;
- boss.js ``maintain`` -> ``failJobsByTimeout``: an active job past its expiration is retried or failed.

Budget: about 40 s on this machine (four runs at time scale 1, the least pg-boss's whole-second
expiration allows)."""

from __future__ import annotations

import pytest

from pg_job_chaos.adapters.pgboss import PgBoss
from pg_job_chaos.core.schedule import JobSpec
from tests.hosted_runs import node_missing, run_hosted
from tests.hosted_runs import violated as _violated

pytestmark = [pytest.mark.chaos]

if (missing := node_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

SCALE = PgBoss.min_time_scale  # 1: the whole-second expiration is the lease


def _run(runner, jobs, **kw):
    return run_hosted(runner, "pg-boss", SCALE, jobs, **kw)


def test_fault_free_every_job_done_once(runner):
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=0.01) for i in range(1, 9)])
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)] * 8
    assert sorted(x["job_id"] for x in h.runs) == list(range(1, 9))
    assert _violated(r) == set(), {n: x.evidence for n, x in r.items() if x.status == "violated"}
    # pg-boss's own record (the descriptor's accepted_finishes): one completion a job, each one's
    assert r["library-one-finish"].status == "held", r["library-one-finish"].evidence


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
    job at once, both committing -- pg-boss's at-least-once, found without luck."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="overrun")])
    assert "no-overlap" in _violated(r), r["no-overlap"].evidence
    assert r["tenant-isolation"].status == "held"
    # the job ends failed by pg-boss's own timeout (watch's resolveWithinSeconds; the late handler's
    # result is dropped, never completed), a failure no execution raised: the property cannot attribute
    # it and says unknown rather than guess
    lof = r["library-one-finish"]
    assert lof.status == "unknown" and "no execution of the job explains" in lof.evidence, lof.evidence
