"""The network faults through the per-worker proxy: latency, reset, partition (nftables drops on the
loopback). A partition longer than the lease: lease-heartbeat sends no effect while cut off; lease
does, and runs the job twice."""

from __future__ import annotations

import os
import subprocess

import pytest

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.harness.net import partition
from pg_job_chaos.properties import HELD, VIOLATED, check

pytestmark = pytest.mark.chaos

SCALE = 0.5  # article seconds: the lease is 0.5 s real, the partition three leases


def _schedule(fault: str, design: str) -> Schedule:
    return Schedule(jobs=(JobSpec(1, duration=2.0), JobSpec(2, tenant=2, duration=0.1)),
                    workers=2, design=design,
                    time_scale=SCALE, events=(Event(fault, 1, point="mid-work", duration=3.0),))


def _tables() -> str:
    return subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout


def _ours() -> str:
    """The prefix of this process's partition tables (the supervisor runs here): nftables is the
    machine's, and another test process may be cutting a worker of its own at the same moment."""
    return f"pgjc_{os.getpid()}_"


needs_nft = pytest.mark.skipif(partition.available() is not None, reason=str(partition.available()))


@needs_nft
def test_partition_longer_than_the_lease_heartbeat_sends_no_effect_while_cut_off(runner):
    h = runner.run(_schedule("partition", "lease-heartbeat"))
    cut = next(i for i in h.injected if i["fault"] == "partition")
    healed = next(i for i in h.injected if i["fault"] == "healed")
    first = next(e for e in h.executions() if e.job == 1 and e.worker == cut["worker"])
    assert not [t for t in first.effect_times if cut["t"] <= t <= healed["t"]]
    assert first.error and "lease lost" in first.error
    results = check(h)
    assert results["no-stale-effect"].status == HELD and results["single-commit"].status == HELD
    assert [j["status"] for j in h.jobs] == ["done", "done"]
    assert _ours() not in _tables()  # healed: no rule left


@needs_nft
def test_partition_lease_sends_its_effect_while_cut_off_and_commits_twice(runner):
    h = runner.run(_schedule("partition", "lease"))
    results = check(h)
    assert results["single-commit"].status == VIOLATED and results["no-stale-effect"].status == VIOLATED
    assert _ours() not in _tables()


def test_reset_cuts_the_worker_mid_transaction_and_the_job_is_retried(runner):
    h = runner.run(_schedule("reset", "lease-heartbeat"))
    struck = next(i for i in h.injected if i["fault"] == "reset")
    first = next(e for e in h.executions() if e.job == 1 and e.worker == struck["worker"])
    assert first.outcome == "fail" and "connection" in (first.error or "")
    assert [j["status"] for j in h.jobs] == ["done", "done"]
    assert check(h)["single-commit"].status == HELD


def test_latency_slows_the_worker_and_the_run_completes(runner):
    h = runner.run(_schedule("latency", "lease"))
    # (a run that is over needs no "latency-ended": it may end with the latency still on)
    assert h.injected[0]["fault"] == "latency" and h.injected[0]["delay"] == pytest.approx(0.05 * SCALE)
    assert h.ended_by == "quiescent" and [j["status"] for j in h.jobs] == ["done", "done"]


@needs_nft
def test_the_janitor_removes_a_partition_left_by_a_dead_harness():
    from pg_job_chaos.harness.janitor import Janitor

    janitor = Janitor()
    table = partition.drop(1)  # port 1: nothing of ours listens there
    janitor.register("nft", table=table)
    janitor._proc.stdin.close()  # as if the harness died: EOF without "done"
    janitor._proc.wait(timeout=30)
    assert table not in _tables()
