"""A worker's idle mark: when its last look for work that found nothing began.

The built-in worker loop (``workers/builtin/base.py``) writes it after every empty dequeue and its
``idle()`` step (a sweep), before it sleeps a poll: 8 bytes (a ``time.monotonic()`` float) at the
start of ``<identity>.idle`` in the run directory, one ``pwrite`` -- a reader sees the old value or
the new one. The supervisor reads it to end a run as soon as every live worker has looked again,
found nothing and swept since the last execution-log record (``harness/supervisor/loop.py``): what
it waited two poll intervals for before. A loop that writes no mark (a hosted library's, a user's
own ``run_worker``) leaves the supervisor on its timed settle.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

SUFFIX = ".idle"
_FORMAT = struct.Struct("<d")


def path_for(run_dir: Path, identity: str) -> Path:
    return Path(run_dir) / f"{identity}{SUFFIX}"


class IdleMark:
    """The writer: one file descriptor, kept open for the worker's life."""

    def __init__(self, run_dir: Path, identity: str):
        self.fd = os.open(path_for(run_dir, identity), os.O_WRONLY | os.O_CREAT, 0o644)

    def mark(self, looked_at: float) -> None:
        """An empty look for work that began at *looked_at* (monotonic) is over."""
        os.pwrite(self.fd, _FORMAT.pack(looked_at), 0)

    def close(self) -> None:
        os.close(self.fd)


def read(run_dir: Path, identity: str) -> float | None:
    """The worker's last mark, or None (no mark written yet, or none ever: its loop writes none)."""
    try:
        with open(path_for(run_dir, identity), "rb") as f:
            data = f.read(_FORMAT.size)
    except OSError:
        return None
    return _FORMAT.unpack(data)[0] if len(data) == _FORMAT.size else None
