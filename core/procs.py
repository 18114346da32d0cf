"""Process helpers, defined once: dying with a parent, telling a reused pid apart, stopping a
server, signalling a process group that may already be gone.

Hazards these exist for: a forked child outlives a SIGKILLed parent unless the kernel is told to
signal it (``PR_SET_PDEATHSIG``), and only if the parent was still alive when it asked; a pid
number is reused, so "is it still ours" needs the start time too.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h
STOP_GRACE = 20.0  # seconds a fast shutdown gets before an immediate one


def die_with_parent(sig: int, parent: int) -> bool:
    """Ask the kernel to send *sig* to this process when its parent dies. False when the parent
    (*parent*, its pid before the fork) is already gone: the caller should leave at once.
    Safe in a ``preexec_fn`` (no allocation beyond ctypes' call)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    return os.getppid() == parent


def process_start_time(pid: int) -> str | None:
    """Process start time in clock ticks (field 22 of /proc/PID/stat): tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def killpg(pgid: int, sig: int) -> None:
    """Signal a whole process group; one that is gone (or no longer ours) is not an error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _escalate(pid: int, steps: tuple[tuple[int, float], ...]) -> None:
    """Send each ``(signal, seconds)`` step's signal and wait up to its seconds for the process to
    end (reaping it if it is our child), then the next; a process that is gone is not an error."""
    for sig, wait in steps:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:  # reap if it is our child; harmless otherwise
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                pass
            if not alive(pid):
                return
            time.sleep(0.05)


def terminate(pid: int, *, grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after *grace* seconds; a process that is gone is not an error."""
    _escalate(pid, ((signal.SIGTERM, grace), (signal.SIGKILL, grace)))


def stop_server(pid: int, *, grace: float = STOP_GRACE) -> None:
    """PostgreSQL's fast shutdown (SIGINT), then immediate (SIGQUIT) after *grace*; never SIGKILL
    (a SIGKILLed postmaster leaves its shared memory and children behind)."""
    _escalate(pid, ((signal.SIGINT, grace), (signal.SIGQUIT, grace)))
