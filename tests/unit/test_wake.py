"""The supervisor's wake-up throttle (harness/supervisor/wake.py): a burst after a quiet spell goes
through at once -- the end of a run is two wake-ups close together -- and a busy run's wake-ups are
held to one per MIN_GAP."""

from __future__ import annotations

import sys

import pytest

from pg_job_chaos.core import idlemark
from pg_job_chaos.harness.supervisor import wake

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


class Clock:
    def __init__(self):
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    monkeypatch.setattr(wake, "COALESCE", 0.0)  # the bucket alone; the coalescing wait has its own test
    c = Clock()
    monkeypatch.setattr(wake.time, "monotonic", c.monotonic)
    monkeypatch.setattr(wake.time, "sleep", c.sleep)
    return c


def _busy_wakes(waker: wake.Waker, run_dir, n: int) -> None:
    for i in range(n):
        (run_dir / f"w{i}.events.jsonl").write_text("x\n")  # pending: select returns at once
        waker.wait(1.0)


def test_a_burst_goes_through_then_wakes_are_spaced(tmp_path, clock):
    waker = wake.Waker(tmp_path)
    if waker.fd is None:
        pytest.skip("no inotify here")
    try:
        _busy_wakes(waker, tmp_path, wake.BURST)
        assert clock.slept == []  # the burst: no wait before any of them
        _busy_wakes(waker, tmp_path, 3)
        assert clock.slept == pytest.approx([wake.MIN_GAP] * 3)  # then one per gap, not faster
        clock.now += 10 * wake.MIN_GAP  # a quiet spell refills the bucket, never beyond BURST
        _busy_wakes(waker, tmp_path, wake.BURST + 1)
        assert clock.slept[3:] == pytest.approx([wake.MIN_GAP])
    finally:
        waker.close()


def test_a_write_is_read_a_moment_later_with_the_rest_of_its_burst(tmp_path, clock, monkeypatch):
    monkeypatch.setattr(wake, "COALESCE", 0.001)
    waker = wake.Waker(tmp_path)
    if waker.fd is None:
        pytest.skip("no inotify here")
    try:
        _busy_wakes(waker, tmp_path, 1)
        assert clock.slept == [0.001]
        waker.wait(0.0)  # nothing written, no time to wait: no coalescing sleep either
        assert clock.slept == [0.001]
    finally:
        waker.close()


def test_an_idle_mark_is_read_at_once(tmp_path, clock, monkeypatch):
    """The end of a run waits on the workers' idle marks: a wake-up by one is not held the coalescing
    millisecond (nothing follows a mark in a burst); one by a record still is."""
    monkeypatch.setattr(wake, "COALESCE", 0.001)
    waker = wake.Waker(tmp_path)
    if waker.fd is None:
        pytest.skip("no inotify here")
    try:
        mark = idlemark.IdleMark(tmp_path, "w1.0")
        mark.mark(5.0)
        waker.wait(1.0)
        assert clock.slept == []
        mark.mark(6.0)
        (tmp_path / "w2.0.events.jsonl").write_text("x\n")  # a record and a mark together: at once too
        waker.wait(1.0)
        assert clock.slept == []
        mark.close()
        _busy_wakes(waker, tmp_path, 1)
        assert clock.slept == [0.001]
    finally:
        waker.close()
