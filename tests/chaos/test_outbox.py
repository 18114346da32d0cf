"""lease-outbox under hand-written schedules: a relay that dies between the send and the mark
re-delivers and the world does it once; a hang inside the finishing transaction is cut by the
server (lease-heartbeat holds it until max runtime); a session the server cut is a budgeted
reconnect."""

from __future__ import annotations

import pytest

from pg_job_chaos import properties
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule

pytestmark = pytest.mark.chaos

SCALE = 0.5  # the server limits are fractions of a lease: see OUTBOX_SCALE in test_search.py


def _run(runner, *jobs, events=(), design="lease-outbox", workers=1):
    h = runner.run(Schedule(jobs=tuple(jobs), events=tuple(events), design=design, workers=workers,
                            time_scale=SCALE, dequeues=30))
    return h, properties.check(h)


def test_a_relay_crash_after_the_send_redelivers_and_the_world_does_it_once(runner):
    h, r = _run(runner, JobSpec(1, fault="crash", point="after-deliver"), JobSpec(2))
    sends = [(e.job, e.relay, e.answer) for e in h.effects()]
    assert (1, "relay", "accepted") in sends and (1, "sweep", "duplicate") in sends
    assert r["at-most-once-effects"].status == "held"
    assert "1 repeated send acknowledged, not done again" in r["at-most-once-effects"].evidence
    assert [j["status"] for j in h.jobs] == ["done", "done"]
    # horizon may be unknown, never held, when the short run ended before a sample saw a worker's session
    not_held = {n: x for n, x in r.items() if x.status != "held"}
    assert set(not_held) <= {"horizon"}, {n: x.evidence for n, x in not_held.items()}
    horizon = not_held.get("horizon")
    assert horizon is None or (
        horizon.status == "unknown" and "no worker session was sampled" in horizon.evidence), horizon


@pytest.mark.parametrize(("design", "horizon"), [("lease-outbox", "held"), ("lease-heartbeat", "violated")])
def test_a_hang_inside_the_finishing_transaction(runner, design, horizon):
    _, r = _run(runner, JobSpec(1, fault="hang", point="after-insert"), design=design)
    assert r["horizon"].status == horizon, r["horizon"].evidence


def test_a_session_the_server_cut_is_a_budgeted_reconnect(runner):
    h, r = _run(runner, JobSpec(1), events=[Event("pause", 1, "after-insert")])
    cuts = [x for x in h.records if x.get("event") == "session-cut"]
    assert cuts and cuts[0]["reason"] in ("idle-in-transaction timeout", "transaction timeout")
    assert r["pool-hygiene"].status == "held", r["pool-hygiene"].evidence
    assert r["horizon"].status == "held", r["horizon"].evidence
    assert r["single-commit"].status == "held"
