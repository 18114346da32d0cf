"""The jobs table's committed status changes (``History.transitions``, harness/postgres/transitions.py):
what ``success-final`` reads besides the final table."""

from __future__ import annotations

from datetime import datetime

import pytest

from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.properties import check

pytestmark = pytest.mark.integration

SCALE = 0.2


def test_the_trigger_logs_each_committed_change_with_its_statement(runner):
    # job 1 raises on its first execution only: queued, running, queued (the handler), running, done
    jobs = (JobSpec(1, tenant=1, fault="raise", strikes=1), JobSpec(2, tenant=2))
    h = runner.run(Schedule(jobs=jobs, workers=1, design="lease-fenced", time_scale=SCALE))
    assert h.ended_by == "quiescent"
    by_job: dict[int, list[dict]] = {}
    for c in h.transitions or ():
        by_job.setdefault(c["job_id"], []).append(c)
    assert [(c["old"], c["status"]) for c in by_job[1]] == [
        (None, "queued"), ("queued", "running"), ("running", "queued"), ("queued", "running"),
        ("running", "done")]
    assert [c["status"] for c in by_job[2]] == ["queued", "running", "done"]
    assert [c["attempts"] for c in by_job[1]] == [0, 1, 1, 2, 2]
    seqs = [c["seq"] for c in h.transitions or ()]
    assert seqs == sorted(seqs)
    claim, fail = by_job[1][1], by_job[1][2]
    assert "attempts = attempts + 1" in claim["query"] and "last_error" in fail["query"]
    assert claim["xact"] != fail["xact"]
    assert all(datetime.fromisoformat(c["at"]).tzinfo is not None for c in h.transitions or ())
    assert check(h, ["success-final"])["success-final"].status == "held"
    # the next run starts from an empty log (the reset truncates it with the queue)
    again = Schedule(jobs=(JobSpec(1, tenant=1),), workers=1, design="lease-fenced", time_scale=SCALE)
    h2 = runner.run(again)
    assert [c["status"] for c in h2.transitions or ()] == ["queued", "running", "done"]
