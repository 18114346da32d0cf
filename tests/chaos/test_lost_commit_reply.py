"""The lost-commit-reply fault through the per-worker proxy: armed at ``before-finish``, the worker's
finishing transaction commits on the server and its reply never reaches the worker, whose connection
is cut with an RST. The worker's log says the execution failed; the ``job_runs`` row says it committed.

Asserted here only what holds by construction: the row committed although the client saw an error,
and ``done-means-committed`` held (it judges the commit, not the log line). For ``lease-heartbeat``
also that the job stays done and committed once: its error handler is fenced on ``status =
'running'``, and the finish that committed set ``done``; and that the heartbeat's own connection was
spared (the proxy targets the point's backend)."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.properties import HELD, check

pytestmark = pytest.mark.chaos

SCALE = 0.5


def _schedule(design: str) -> Schedule:
    return Schedule(jobs=(JobSpec(1, duration=0.2), JobSpec(2, tenant=2, duration=0.1)),
                    workers=2, design=design,
                    time_scale=SCALE, events=(Event("lost-commit-reply", 1, point="before-finish"),))


def _struck(h):
    """The injected record and the execution it struck."""
    struck = next(i for i in h.injected if i["fault"] == "lost-commit-reply")
    ex = next(e for e in h.executions()
              if (e.job, e.worker, e.attempt) == (1, struck["worker"], struck["attempt"]))
    return struck, ex


@pytest.mark.parametrize("design", ["lease-heartbeat", "lease-outbox", "one-transaction"])
def test_the_finish_commits_while_the_worker_sees_a_lost_connection(runner, design):
    h = runner.run(_schedule(design))
    struck, ex = _struck(h)
    assert struck["point"] == "before-finish" and struck["backend"]
    assert ex.outcome == "fail" and "connection" in (ex.error or "").lower(), ex.error
    rows = [r for r in h.runs if (r["job_id"], r["worker"], r["attempt"]) == (1, ex.worker, ex.attempt)]
    assert len(rows) == 1 and rows[0]["finished"] is not None  # committed, although the client saw an error
    assert check(h)["done-means-committed"].status == HELD


def test_lease_heartbeat_keeps_the_job_done_and_spares_the_heartbeat(runner):
    h = runner.run(_schedule("lease-heartbeat"))
    struck, ex = _struck(h)
    assert ex.outcome == "fail"
    assert [j["status"] for j in h.jobs] == ["done", "done"]  # the fenced failure handler matched no row
    assert len([r for r in h.runs if r["job_id"] == 1]) == 1 and check(h)["single-commit"].status == HELD
    assert not [r for r in h.records if r.get("event") == "heartbeat-error" and r.get("job") == 1]
