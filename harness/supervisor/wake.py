"""What the supervisor's loop waits on between ticks: a write in the run directory or a worker's exit.

The loop used to sleep a fixed tick (:data:`~harness.supervisor.loop.TICK`) and poll; now it sleeps
until the first of: a file in the run directory written (an execution-log record, a log line, an
idle mark: Linux ``inotify``, which sees the writes of every worker whatever its language), a worker
process ended (its ``multiprocessing`` sentinel), or the tick. Nothing a run observes changes: the
loop does the same work per wake-up, only sooner. Where ``inotify`` is missing (not Linux, or its
watches exhausted), the tick alone wakes it, as before.

Hazard: every record wakes the loop; a busy run (hundreds of records a second) must not spend a core on
wake-ups that the workers and the server need: a token bucket lets :data:`BURST` wake-ups through at
once and refills one per :data:`MIN_GAP` (at most 200 a second, sustained), and a write that wakes the
loop is read :data:`COALESCE` later, with the rest of its burst (a job's end writes four or five records
within a millisecond: one wake-up, not five). A fixed gap after every wake-up cost the end of each run
two gaps (settle 8-10 ms of a ~90 ms fault-free example, now ~3): the last job's record, then the idle
marks, each came just after a wake-up. A strike at a point waits the extra millisecond; a wake-up by an
idle mark does not (the end of a run waits on marks, and no burst follows one).

Hazard: closing an inotify instance waits for a kernel grace period (~17 ms measured here, a sixth of a
fault-free example): one instance serves every run of a process, each run adding a watch on its own
directory (the kernel drops it when the directory is removed). A forked process (a slot) makes its own:
sharing one, two processes would read each other's events.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import select
import struct
import time
from collections.abc import Iterable
from pathlib import Path

from ...core import idlemark

log = logging.getLogger("pgjc.supervisor")

MIN_GAP = 0.005  # seconds per token: sustained, at most 200 wake-ups a second
BURST = 4  # wake-ups allowed back to back after a quiet spell
COALESCE = 0.001  # seconds: after a write wakes the loop, let the rest of its burst land first
_IN_MODIFY = 0x2
_IN_CREATE = 0x100
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name
_MARK = idlemark.SUFFIX.encode()
_libc = None
_instance: tuple[int, int] | None = None  # (pid, inotify fd) of this process


def _inotify():
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        _libc = ctypes.CDLL(name, use_errno=True) if name else False
    return _libc or None


def _instance_fd(libc) -> int | None:
    """This process's inotify instance, made on first use and kept (see the hazard above)."""
    global _instance
    if _instance is not None and _instance[0] == os.getpid():
        return _instance[1]
    try:
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    except AttributeError:  # a libc without inotify
        return None
    if fd < 0:
        log.debug("inotify_init1 failed (errno %d): the loop polls", ctypes.get_errno())
        return None
    _instance = (os.getpid(), fd)
    return fd


class Waker:
    """Wait for activity in *run_dir* (one run's). :meth:`close` forgets the watch; the kernel drops it
    when the directory is removed."""

    def __init__(self, run_dir: Path):
        self.fd: int | None = None
        self._watch = -1
        self._last = 0.0
        self._tokens = float(BURST)
        libc = _inotify()
        fd = _instance_fd(libc) if libc is not None else None
        if fd is None:
            return
        self._drain_fd(fd)  # what an earlier run's directory said last
        self._watch = libc.inotify_add_watch(fd, os.fsencode(str(run_dir)), _IN_MODIFY | _IN_CREATE)
        if self._watch < 0:
            log.debug("inotify_add_watch failed (errno %d): the loop polls", ctypes.get_errno())
            return
        self.fd = fd

    def wait(self, timeout: float, sentinels: Iterable[int] = ()) -> None:
        """Return after at most *timeout* seconds, sooner on a write in the run directory or when a
        process whose sentinel is in *sentinels* ends."""
        self._refill()
        if self._tokens < 1:
            gap = (1 - self._tokens) * MIN_GAP
            time.sleep(min(gap, timeout))
            timeout -= gap
        if timeout > 0:
            fds = list(sentinels) + ([self.fd] if self.fd is not None else [])
            try:
                ready, _, _ = select.select(fds, [], [], timeout)
                if ready and COALESCE > 0 and not (self.fd in ready and self._marked()):
                    time.sleep(COALESCE)  # the rest of a burst (a job's end writes several records)
            except (OSError, ValueError):  # a sentinel closed under us: the tick will do
                time.sleep(timeout)
        self._drain()
        self._refill()
        self._tokens = max(0.0, self._tokens - 1)

    def _marked(self) -> bool:
        """Whether the writes that woke us include an idle mark (``core/idlemark.py``): a look for
        work is over, nothing follows it in a burst -- the run's end waits on these, not a millisecond
        more. Reads the events there are (the rest are drained after)."""
        try:
            buf = os.read(self.fd, 65536) if self.fd is not None else b""
        except OSError:
            return False
        i = 0
        while i + _EVENT.size <= len(buf):
            length = _EVENT.unpack_from(buf, i)[3]
            if buf[i + _EVENT.size:i + _EVENT.size + length].rstrip(b"\0").endswith(_MARK):
                return True
            i += _EVENT.size + length
        return False

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(float(BURST), self._tokens + (now - self._last) / MIN_GAP)
        self._last = now

    def _drain(self) -> None:
        if self.fd is not None:
            self._drain_fd(self.fd)

    @staticmethod
    def _drain_fd(fd: int) -> None:
        try:
            while os.read(fd, 65536):
                pass
        except OSError:  # BlockingIOError: nothing more to read
            pass

    def close(self) -> None:
        """Remove the watch; the instance stays open for the next run."""
        libc = _inotify()
        if self.fd is not None and libc is not None:
            libc.inotify_rm_watch(self.fd, self._watch)  # fails harmlessly if the directory is gone
        self.fd = None
