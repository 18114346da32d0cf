"""``PGJC_STRESS=N`` (tests/stress.py): the busy loops start, spin, stop, and outlive no pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import stress
from tests.conftest import ROOT


def _cpu_ticks(pid: int) -> int:
    """utime + stime of *pid* in clock ticks (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _spun(pids: list[int], before: list[int]) -> bool:
    return all(_cpu_ticks(p) > b for p, b in zip(pids, before, strict=True))


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether *pid* is gone, or a zombie nobody reaps (it spins no more), within *within* seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_the_count_reads_the_variable():
    assert stress.count({}) == 0
    assert stress.count({stress.ENV: ""}) == stress.count({stress.ENV: " 0 "}) == 0
    assert stress.count({stress.ENV: "2"}) == 2
    for bad in ("two", "-1", str(stress.MOST + 1)):
        with pytest.raises(pytest.UsageError, match="expected a number of busy loops"):
            stress.count({stress.ENV: bad})


def test_busy_loops_spin_until_stopped():
    loops = stress.BusyLoops(2).start()
    try:
        pids = loops.pids
        assert len(pids) == 2 and all(Path(f"/proc/{p}").exists() for p in pids)
        before = [_cpu_ticks(p) for p in pids]
        # Each spins: it gains CPU time. A busy machine gives it less, not none for 10 s (a tick is 10 ms).
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not _spun(pids, before):
            time.sleep(0.05)
        assert _spun(pids, before), "a busy loop did not run"
    finally:
        loops.stop()
    assert not any(Path(f"/proc/{p}").exists() for p in pids)  # killed and reaped
    assert loops.pids == []
    loops.stop()  # again: nothing to do


def test_busy_loops_die_with_a_killed_pytest():
    # A process that starts two and is then SIGKILLed (as a CI runner ends a job): none is left spinning.
    code = ("import time; from tests import stress; b = stress.BusyLoops(2).start(); "
            "print(*b.pids, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdin=subprocess.DEVNULL)
    try:
        pids = [int(p) for p in (proc.stdout.readline() if proc.stdout else "").split()]
        assert len(pids) == 2, pids
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
    assert all(_gone(p) for p in pids), [p for p in pids if not _gone(p, 0)]


def test_the_hooks_start_them_in_the_main_process_only_and_stop_them(monkeypatch):
    """tests/conftest.py's hooks: the main process starts them (header names them), an xdist worker
    (``workerinput``) does not, and the session's end stops them."""
    from tests import conftest

    class Main:
        pass

    class XdistWorker:
        workerinput: dict = {}

    monkeypatch.setenv(stress.ENV, "2")
    monkeypatch.setattr(conftest, "_busy", [])  # the session's own, if the suite runs under PGJC_STRESS
    conftest.pytest_configure(XdistWorker())  # type: ignore[arg-type]
    assert conftest._busy == []
    conftest.pytest_configure(Main())  # type: ignore[arg-type]
    try:
        pids = conftest._busy[0].pids
        assert len(pids) == 2 and all(Path(f"/proc/{p}").exists() for p in pids)
        assert conftest.pytest_report_header(Main()) == (  # type: ignore[arg-type]
            f"{stress.ENV}: 2 busy loops beside the suite (pids {pids[0]}, {pids[1]})")
    finally:
        conftest.pytest_unconfigure(Main())  # type: ignore[arg-type]
    assert conftest._busy == [] and all(_gone(p) for p in pids)
