"""Logging survives workers that die mid-burst (issue 4, Logging).

Forked children log in a burst -- short lines and, every 64th, an 8 KB one (longer than a pipe's
atomic write) -- while some (logging in a tight loop) are SIGKILLed and some leave by ``os._exit(1)`` """ \
"""at arbitrary moments,
round after round. After every round the parent logs a line of its own and checks, within a
bound, that (a) its line reached its handlers, (b) every surviving child has a newer line there,
and (c) nothing waits forever: every child is reaped, the whole scenario has a deadline.

The same scenario runs against the harness's logging (``core.logs``: a file per worker,
merged by the parent), which must pass, and against ``multiprocessing-logging`` (the card's
package, fork start method), which must fail: a child killed while its queue feeder thread
holds the queue's cross-process write lock leaves the lock held forever, and every other
writer -- the parent included -- blocks behind it (``benchmarks/mp_logging_kill.py``: 20 of 20
trials lost every later record, both for SIGKILL and for ``os._exit(1)``). No PostgreSQL.
"""

from __future__ import annotations

import ctypes
import io
import logging
import multiprocessing
import os
import random
import signal
import threading
import time

import pytest

from pg_job_chaos.core import logs

pytestmark = pytest.mark.chaos

SURVIVORS = 3
ROUNDS = 20  # each round: two children SIGKILLed, one ending with os._exit(1), all mid-burst
# Seconds for the parent's line and the survivors' new lines to arrive after a round: a bound on
# "never", not a speed. The harness's logging gets a generous one (it returns as soon as the lines are
# there: a quiet machine pays nothing; beside two busy loops a survivor went unscheduled for 3 s, issue
# 51); multiprocessing-logging's lost lines are lost for good (a lock held by the dead), so a short
# wait shows it without paying 30 s for the expected failure.
WAIT = {"harness": 30.0, "multiprocessing-logging": 3.0}
CHILD_LIFETIME = 150.0  # a child nobody kills leaves by itself (past the timeout: a survivor must
# outlive every round, however slow the machine; kill_all and PR_SET_PDEATHSIG end it before)
BIG = 8192
PR_SET_PDEATHSIG = 1


class Collect(logging.Handler):
    """Remembers, per source, the highest line number that reached the parent's handlers."""

    def __init__(self):
        super().__init__()
        self.last: dict[str, int] = {}
        self.guard = threading.Lock()

    def emit(self, record):
        parts = record.getMessage().split(" ", 2)
        if len(parts) >= 2 and parts[1].isdigit():
            with self.guard:
                self.last[parts[0]] = max(self.last.get(parts[0], -1), int(parts[1]))

    def snapshot(self) -> dict[str, int]:
        with self.guard:
            return dict(self.last)


def _child(backend: str, run_dir, name: str, exit_after: float | None, tight: bool) -> None:
    """A worker's life as the harness lives it: set up logging first, log, end by os._exit.

    A *tight* child (a victim) logs without pause until it is killed or exits; a survivor logs in
    bursts of 16 lines every 5 ms, so that the parent, which re-formats every line, keeps up.
    """
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if backend == "harness":
            logs.worker_setup(run_dir, name)
        log = logging.getLogger("pgjc.test.child")
        big = "x" * BIG
        end = time.monotonic() + (exit_after if exit_after is not None else CHILD_LIFETIME)
        seq = 0
        while time.monotonic() < end:
            seq += 1
            log.info("%s %d %s", name, seq, big if seq % 64 == 0 else "burst")
            if not tight and seq % 16 == 0:
                time.sleep(0.005)
        os._exit(1 if exit_after is not None else 0)
    finally:
        os._exit(1)


class Scenario:
    def __init__(self, backend: str, run_dir):
        self.backend, self.run_dir = backend, run_dir
        self.mp = multiprocessing.get_context("fork")
        self.procs: dict[str, multiprocessing.process.BaseProcess] = {}
        self.serial = 0
        self.rng = random.Random(4)
        self.parent = logging.getLogger("pgjc.test.parent")
        self.merger = logs.Merger(run_dir)

    def fork(self, exit_after: float | None = None, *, tight: bool = True) -> str:
        self.serial += 1
        name = f"w{self.serial}.0"
        p = self.mp.Process(target=_child, args=(self.backend, self.run_dir, name, exit_after, tight),
                            daemon=False)
        p.start()
        self.procs[name] = p
        return name

    def pump(self) -> None:
        if self.backend == "harness":
            self.merger.poll()

    def wait_for(self, sink: Collect, want: dict[str, int], timeout: float) -> list[str]:
        end = time.monotonic() + timeout
        while True:
            self.pump()
            seen = sink.snapshot()
            missing = sorted(s for s, n in want.items() if seen.get(s, -1) <= n)
            if not missing or time.monotonic() >= end:
                return missing
            time.sleep(0.01)

    def run(self, sink: Collect) -> None:
        survivors = [self.fork(tight=False) for _ in range(SURVIVORS)]
        for r in range(1, ROUNDS + 1):
            killed = [self.fork(), self.fork()]
            exiting = self.fork(exit_after=self.rng.uniform(0.005, 0.04))
            time.sleep(self.rng.uniform(0.005, 0.04))
            for name in killed:
                os.kill(self.procs[name].pid, signal.SIGKILL)
            for name in [*killed, exiting]:
                p = self.procs[name]
                p.join(5.0)
                assert p.exitcode is not None, f"{name} did not end within 5 s"
            seen = sink.snapshot()
            want = {s: seen.get(s, -1) for s in survivors}
            self.parent.info("supervisor %d after round %d", r, r)
            want["supervisor"] = r - 1
            missing = self.wait_for(sink, want, WAIT[self.backend])
            assert not missing, (
                f"round {r}: no new line from {missing} within {WAIT[self.backend]} s after children "
                "died mid-burst"
                + (" (the parent's own line is lost)" if "supervisor" in missing else ""))

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.exitcode is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for name, p in self.procs.items():
            p.join(5.0)
            assert p.exitcode is not None, f"{name} could not be reaped"


@pytest.fixture
def root_logging():
    """The root logger, restored after the test (handlers, level).

    The test itself calls :func:`_bare` first: pytest adds its own handlers to the root logger for
    the call phase, after fixtures are set up, and they would keep (and format) every burst line.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    for h in handlers:
        if h not in root.handlers:
            root.addHandler(h)
    root.setLevel(level)


def _bare(root: logging.Logger) -> None:
    for h in list(root.handlers):
        root.removeHandler(h)


@pytest.mark.timeout(120)
def test_harness_logging_survives_workers_killed_mid_burst(tmp_path, root_logging):
    _bare(root_logging)
    out = io.StringIO()
    logs.setup(logging.INFO, stream=out)
    sink = Collect()
    root_logging.addHandler(sink)
    sc = Scenario("harness", tmp_path)
    try:
        sc.run(sink)  # every round bounded by WAIT, the whole test by its timeout: nothing waits forever
    finally:
        sc.kill_all()
    logs.Merger(tmp_path).poll(final=True)

    text = out.getvalue()
    # Human-readable, with identities: the parent's lines and the merged workers' lines.
    assert f"supervisor[{os.getpid()}] pgjc.test.parent: supervisor {ROUNDS} after round {ROUNDS}" in text
    assert " w1.0[" in text and " pgjc.test.child: w1.0 " in text
    # A torn line can only be a killed worker's last one, never anything the reader misreads.
    assert "unreadable log line" not in text
    for line in text.splitlines():
        if "torn last log line" in line:
            who = line.split()[2].split("[")[0]
            assert sc.procs[who].exitcode == -signal.SIGKILL, line
    for who in ("w1.0", "w2.0", "w3.0"):  # the survivors wrote to files of their own
        assert logs.path_for(tmp_path, who).stat().st_size > 0


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "multiprocessing-logging shares one multiprocessing.Queue; a child killed (or os._exit'ed) while its "
    "feeder thread holds the queue's cross-process write lock leaves it held: every later record, the "
    "parent's included, is lost (benchmarks/mp_logging_kill.py: 20 of 20 trials, SIGKILL and os._exit)"))
def test_multiprocessing_logging_loses_everything_after_a_kill(tmp_path, root_logging):
    mpl = pytest.importorskip("multiprocessing_logging")
    if multiprocessing.get_start_method() != "fork":
        pytest.skip("multiprocessing-logging needs the fork start method")
    _bare(root_logging)
    sink = Collect()
    root_logging.addHandler(sink)
    root_logging.setLevel(logging.INFO)
    mpl.install_mp_handler(root_logging)
    (handler,) = root_logging.handlers
    sc = Scenario("multiprocessing-logging", tmp_path)
    try:
        sc.run(sink)
    finally:
        sc.kill_all()
        # Never hang this process: its own queue feeder thread may wait on the dead child's lock
        # forever; without this, multiprocessing's exit hook would join it at interpreter exit.
        root_logging.removeHandler(handler)
        handler.queue.cancel_join_thread()
        handler._is_closed = True
