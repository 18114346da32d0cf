"""What a worker's libraries leave in the machine's temp places goes -- its temp files with the run, its
named semaphores when the harness ends -- even when a fault kills the worker's whole process group.

A killed process runs no finalizer, and the harness kills workers by process group (a crash, a deploy's
grace, the run's end). What Python's ``multiprocessing`` makes outside the process then stays: chancy's
process executor (a spawned ``Manager`` and a spawn-context pool) left a ``pymp-*`` directory in ``/tmp``
and a few hundred named semaphores (``/dev/shm/sem.mp-*``) per crash-fault search, found in this
machine's ``/tmp`` after a day of runs. Two measures:

* :func:`worker_tempdir`: a worker's ``TMPDIR`` (and ``tempfile``'s) is a directory of the run's,
  :func:`run_tempdir`, which the runner removes after the run -- and its janitor after a SIGKILL of the
  harness; the processes a library spawns inherit it through the environment (``pymp-*`` directories, a
  ``Manager``'s socket);
* :func:`share_resource_tracker`: the harness starts ``multiprocessing``'s resource tracker itself,
  outside every worker's process group, before it forks any worker. Forked workers, and the processes
  they spawn (``multiprocessing.spawn`` passes the tracker's pipe on), register their named semaphores
  and shared memory with it; a group kill leaves it alive, and it unlinks what is still registered once
  the last process holding its pipe has ended (the harness included: it outlives a SIGKILLed harness by
  as long as its workers take to die with it).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from multiprocessing import resource_tracker
from pathlib import Path

# The machine's temp root for what the harness makes per run: in memory where there is a tmpfs (on this
# machine's ext4 /tmp a directory took ~1 ms to make: harness/runner.py's run directories live here too),
# read before any worker makes its own temp directory the default.
_SHM = Path("/dev/shm")
TEMP_ROOT = _SHM if _SHM.is_dir() and os.access(_SHM, os.W_OK) else Path(tempfile.gettempdir())
_shared = [False]  # this process started (or, forked, inherited) the tracker


def run_tempdir(run_dir: Path) -> Path:
    """The temp directory of the run whose directory is *run_dir*: short, in :data:`TEMP_ROOT`, named by a
    digest of *run_dir* (so the runner and its workers find the same one). Whoever removes a run directory
    without its runner (a slot killed mid-run: harness/slots.py) removes this one too."""
    # Hazard: a Unix socket's path has at most 107 bytes, and a Manager's listener is made in here
    # (<this>/<identity>/pymp-XXXXXXXX/listener-XXXXXXXX): under the run directory itself (deep in
    # /dev/shm/pg-job-chaos/slot-.../logs-...) or a test's tmp_path it did not fit ("AF_UNIX path too
    # long"). This one is ~25 bytes.
    digest = hashlib.sha1(str(Path(run_dir).resolve()).encode()).hexdigest()[:10]
    return TEMP_ROOT / f"pgjc-tmp-{digest}"


def worker_tempdir(run_dir: Path, identity: str) -> Path:
    """Make *identity*'s temp directory in the run's (:func:`run_tempdir`) and make it this process's:
    ``TMPDIR`` for the processes it starts, ``tempfile.tempdir`` for itself. Call it in the forked worker."""
    base = run_tempdir(run_dir)
    base.mkdir(mode=0o700, exist_ok=True)  # the run's: its workers' only
    path = base / identity
    path.mkdir(mode=0o700, exist_ok=True)
    os.environ["TMPDIR"] = str(path)
    tempfile.tempdir = str(path)
    return path


def share_resource_tracker() -> None:
    """Start this process's ``multiprocessing`` resource tracker now (once a process: later calls, and
    calls in a process forked after it, do nothing), with nothing of ours open in it: its standard
    streams are ``/dev/null``, so that its warning of the semaphores a killed worker leaked (true: they
    were, and it unlinks them) is not the user's, and a pipe reading the harness's output is not held
    open by it."""
    if _shared[0]:
        return
    # Hazard: fds 0-2 are swapped for the start's few milliseconds; call it before any thread writes.
    null = os.open(os.devnull, os.O_RDWR)
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    try:
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        resource_tracker.ensure_running()
        _shared[0] = True
    finally:
        for fd, old in zip((0, 1, 2), saved, strict=True):
            os.dup2(old, fd)
            os.close(old)
        os.close(null)
