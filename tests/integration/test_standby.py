"""Standby workers (``harness/supervisor/standby.py``, issue 36 item 5): the next run's workers forked,
and their pool's first connection opened, during the run before; taken only by a run like it."""

from __future__ import annotations

import os

import pytest

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.properties import check

pytestmark = pytest.mark.integration

# A run long enough that it samples pg_stat_activity several times after its standbys connected (at 0.2 a
# lease is 0.2 s: a sample every 50 ms; six jobs of 60 ms on two workers), each job's transaction shorter
# than horizon's half a lease.
LONG = Schedule(jobs=tuple(JobSpec(i, tenant=i, duration=0.3) for i in range(1, 7)), workers=2,
                design="lease", time_scale=0.2)


def _ahead(h) -> dict[str, int]:
    return {r["worker"]: r["backend"] for r in h.records if r["event"] == "connect" and r.get("ahead")}


def _statuses(h) -> dict[str, str]:
    return {n: r.status for n, r in check(h).items()}


def test_the_next_run_takes_the_standbys_and_the_run_before_never_samples_their_sessions(runner):
    runner.standby.release()  # the session's runner: nothing forked by an earlier test's runs
    first = runner.run(LONG)
    taken = runner.standby.taken
    second = runner.run(LONG)
    assert runner.standby.taken - taken == 2
    ahead = _ahead(second)
    assert set(ahead) == {"w1.0", "w2.0"}, second.records[:6]
    # Opened during the first run, named w1.0 and w2.0 as its own workers were: not in its samples...
    assert not set(ahead.values()) & {s["pid"] for s in first.samples}
    # ...and sampled in the second, as its workers' sessions
    assert set(ahead.values()) <= {s["pid"] for s in second.samples if s["role"] == "worker"}
    # The same verdicts either way, but horizon's: at time scale 0.2 its threshold is 0.1 s, which a live
    # worker's 60 ms transaction exceeds on a loaded machine (seen: 0.12 s, issue 51). What a standby could
    # do to horizon -- its idle sessions sampled as the run before's -- is the membership asserted above.
    timed = {"horizon"}
    assert {n: v for n, v in _statuses(first).items() if n not in timed} == {
        n: v for n, v in _statuses(second).items() if n not in timed}
    assert all(v != "violated" for n, v in _statuses(second).items() if n not in timed)


def test_a_run_unlike_the_one_before_forks_its_own_workers_and_nothing_is_left(runner):
    runner.run(LONG)
    waiting = [w.proc.pid for w in runner.standby._waiting.values()]
    assert len(waiting) == 2
    taken = runner.standby.taken
    other = runner.run(LONG.replace(tenant_mode="session-autocommit"))  # another pool: the standbys are ended
    assert runner.standby.taken == taken and not _ahead(other)
    for pid in waiting:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    runner.run(LONG.replace(workers=1))  # arms one slot per worker of the run
    assert len(runner.standby._waiting) == 1
    runner.standby.close()
    assert not runner.standby._waiting


def test_a_design_that_asks_its_pool_otherwise_gets_a_new_one(runner):
    """The outbox adds its session limits to the DSN before opening its pool: the standby's pool, opened
    without them, is closed unused and unrecorded -- the limits hold (a hang is cut by the server)."""
    s = Schedule(jobs=(JobSpec(1, tenant=1),), workers=1, design="lease-outbox", time_scale=0.5)
    runner.run(s)
    taken = runner.standby.taken
    second = runner.run(s)
    assert runner.standby.taken == taken + 1  # a standby was taken: its pool, not it, was refused
    assert not _ahead(second)
    assert [r["backend"] for r in second.records if r["event"] == "connect" and r.get("purpose") is None]
    assert any(r["event"] == "session-limits" for r in second.records)


def test_a_run_through_the_fault_proxy_arms_none(runner):
    """Its workers connect through the proxy (a DSN of this run's): the next run, likely one too, would
    match no standby -- none is forked, none wasted."""
    runner.standby.release()
    s = Schedule(jobs=(JobSpec(1, tenant=1), JobSpec(2, tenant=2)), workers=1, design="lease", time_scale=0.5,
                 events=(Event("lost-commit-reply", 1, point="before-finish"),))
    forked = runner.standby.forked
    runner.run(s)
    assert runner.standby.forked == forked and not runner.standby._waiting
    runner.run(LONG)
    assert len(runner.standby._waiting) == 2
