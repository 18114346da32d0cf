"""Busy loops: processes that each keep a core busy, to run something beside load on purpose.

A harness's verdict must not depend on a quiet machine -- a shared CI runner, a laptop compiling beside
it. ``PGJC_STRESS=N pytest`` (``tests/stress.py``) runs the suite beside N of them and ``run.py soak``
searches beside its own (:mod:`harness.bench.soak`). Each spins ``while True: pass`` at normal priority
and is tied to its parent's death (``PR_SET_PDEATHSIG`` = SIGKILL): a parent killed with SIGKILL leaves
none behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from ...core.procs import die_with_parent

SPIN = "while True: pass"


class BusyLoops:
    """*n* processes that each keep a core busy, until :meth:`stop` (or the death of their parent)."""

    def __init__(self, n: int):
        self.n = n
        self.procs: list[subprocess.Popen] = []

    def start(self) -> BusyLoops:
        parent = os.getpid()
        for _ in range(self.n):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                preexec_fn=lambda: die_with_parent(signal.SIGKILL, parent) or os._exit(0)))
        return self

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        """Kill and reap each (they hold nothing to clean up); idempotent."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait(10)
        self.procs.clear()

    def __enter__(self) -> BusyLoops:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

