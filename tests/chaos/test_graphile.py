"""graphile-worker (the real library, Node, adapters/graphile.py through the worker contract) under the
harness: fault-free, a transient raise, a crash and an overrun, each asserting what graphile-worker's
own code implies (0.17.3, workers/clients/node/node_modules/graphile-worker/dist):

- sql/getJobs.js:138-145: the fetch sets ``attempts = jobs.attempts + 1`` and ``locked_at``: the attempt
  the body is told;
- sql/completeJobs.js:39-40: a success deletes the row (its attempts read back from the adapter's
  shadow table, which a delete trigger fills with the row's own count);
- sql/failJobs.js:49-57: a failure (fenced by ``locked_by``) unlocks it, ``run_at`` pushed by """ \
  """``exp(least(attempts, 10))`` s;
- sql/resetLockedAt.js:9-12: only a job locked more than 4 hours is unlocked -- its one recovery;
- worker.js:196: the task is awaited with no timeout: nothing takes a job from a live worker.

Budget: about 45 s on this machine (four runs at time scale 0.5, the search's default: graphile has
no minimum, its intervals being fixed; the raise waits its e s backoff, the crash its stall limit)."""

from __future__ import annotations

import pytest

from pg_job_chaos.adapters.graphile import GraphileWorker
from pg_job_chaos.core import overlap
from pg_job_chaos.core.schedule import JobSpec, Timing
from pg_job_chaos.harness import scales
from tests.hosted_runs import fault_free_every_job_done_once, node_missing, run_hosted
from tests.hosted_runs import violated as _violated

pytestmark = [pytest.mark.chaos]

if (missing := node_missing()) is not None:
    pytest.skip(missing, allow_module_level=True)

SCALE = GraphileWorker.min_time_scale or scales.SEARCH  # None: no interval of graphile's scales


def _run(runner, jobs, **kw):
    return run_hosted(runner, "graphile-worker", SCALE, jobs, **kw)


def test_fault_free_every_job_done_once(runner):
    """Every job deleted by its success (completeJobs.js:39-40): done, the deleted row's attempts 1."""
    h, r = fault_free_every_job_done_once(runner, "graphile-worker", SCALE)
    assert [e.attempt for e in h.executions()] == [1] * 8  # job.attempts after the fetch's + 1
    assert _violated(r) == set(), {n: x.evidence for n, x in r.items() if x.status == "violated"}
    assert r["attempts-counted"].status == "held"
    # graphile's own record: each job's delete on success (the shadow table dates it), one a job
    assert r["library-one-finish"].status == "held", r["library-one-finish"].evidence
    assert {len(e["finishes"]) for e in h.finishes} == {1}


def test_a_transient_raise_is_retried_to_done(runner):
    """failJobs.js:52: the retry waits exp(1) s (fixed in SQL), then the fetch counts attempt 2."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="raise", strikes=1)], workers=1)
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 2)]
    ex = h.executions()
    assert [e.attempt for e in ex] == [1, 2]
    assert ex[1].start - ex[0].end >= 2.7  # exp(1) s: graphile's backoff, whatever the time scale
    assert r["transient-recovers"].status == "held" and r["done-means-committed"].status == "held"
    # the retried failure leaves only last_error: graphile's record is the success, attempt 2's
    assert [(f["outcome"], f["attempt"]) for f in h.finishes[0]["finishes"]] == [("success", 2)]
    assert r["library-one-finish"].status == "held", r["library-one-finish"].evidence


def test_a_crashing_job_stays_locked_for_the_run(runner):
    """resetLockedAt.js:9-12: a dead worker's job is unlocked only after 4 hours, graphile's documented
    lock timeout. Within the run it stays locked (running, attempts 1) and no worker retries it, while
    a job without a fault is done; the run ends with the crashed one pending: terminal-states violated
    by that documented limitation (the run's notes say the 4 h lock breaks the lease's ratio), not a bug."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="crash"), JobSpec(2, tenant=2, duration=0.01)],
                max_attempts=2, restarts=2, timing=Timing(deadline=20.0))
    rows = {j["id"]: (j["status"], j["attempts"], j["lease_expired"]) for j in h.jobs}
    assert rows == {1: ("running", 1, False), 2: ("done", 1, None)}
    assert [e.job for e in h.executions()].count(1) == 1  # the restarted worker does not take it
    # pending counts the locked job (graphile acts on it after 4 h): never quiescent. Each worker's
    # first resetLockedAt runs at random within 60 s (main.js:253), its statement new activity: the
    # deadline (20 article s, + the retry backoff's stretch) bounds the run.
    assert h.ended_by in ("stalled", "deadline")
    assert any("lock timeout / lease" in n and "fixed in the library" in n for n in h.notes), h.notes
    assert _violated(r) == {"terminal-states"}, \
        {n: x.evidence for n, x in r.items() if x.status == "violated"}
    assert r["terminal-states"].jobs == (1,) and r["progress"].status == "held"


def test_an_overrun_runs_once(runner):
    """worker.js:196 awaits the task with no timeout, and no lock of a live worker's job is taken
    (resetLockedAt.js: 4 hours): a job working 1.5 leases runs once, to done -- no duplicate."""
    h, r = _run(runner, [JobSpec(1, tenant=1, fault="overrun")])
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)]
    assert len(h.executions()) == 1 and len(h.runs) == 1
    assert r["no-overlap"].status == "held" and r["single-commit"].status == "held"


def test_one_body_at_a_time_graphiles_concurrent_jobs(runner):
    """graphile-worker's concurrentJobs is 1 (dist/config.js): three jobs of one worker never overlap."""
    h, r = _run(runner, [JobSpec(i, tenant=i, duration=0.2) for i in range(1, 4)], workers=1)
    assert h.ended_by == "quiescent"
    assert GraphileWorker.concurrency == 1 and h.schedule.pool_size > 1
    assert overlap.bodies_at_once(h).worker == 1
