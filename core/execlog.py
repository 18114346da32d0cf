"""The execution log: what each execution did *in the world*, outside the database.

One append-only file per worker process, one JSON object per line, each written with a single
unbuffered ``os.write`` -- so ``os._exit`` or SIGKILL loses nothing already written, and a
rollback cannot take anything back. Properties decide from this log plus the final tables; it
never depends on the database being up.

Every line has: ``t`` (``time.monotonic()``, comparable across processes on one machine),
``wall`` (``time.time()``), ``worker`` (identity; a restarted worker is a new one), ``pid`` and
``event`` (a :class:`core.events.LogEvent`: :meth:`ExecLog.write` refuses any other name); job events add
``job`` and ``attempt``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from . import jsonline
from .events import LogEvent, misspelt

SUFFIX = ".events.jsonl"

# getpid() is a system call (glibc caches nothing), ~2 us in this VM: an eighth of a record's cost.
# Hazard: a Python fork (os.fork, multiprocessing, a hosted library's children) must refresh it --
# a record with its parent's pid would be taken for the parent's.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


class ExecLog:
    def __init__(self, path: Path, worker: str):
        self.path = Path(path)
        self.worker = worker
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, event: str, **fields: object) -> None:
        """One record of *event*: a :class:`~core.events.LogEvent` (or its string), or a name of the
        design's own (the properties pass over it). A misspelt event (:func:`~core.events.misspelt`) is a
        :class:`ValueError` here, where it is written, not a record no reader ever matches."""
        why = misspelt(event)
        if why is not None:
            raise ValueError(why)
        rec = {"t": time.monotonic(), "wall": time.time(), "worker": self.worker, "pid": _pid,
               "event": event, **fields}
        # One write per line: O_APPEND makes each write land whole at the end of the file.
        os.write(self.fd, jsonline.line(rec))

    def close(self) -> None:
        os.close(self.fd)


_STARTED = f'"{LogEvent.STARTED}"'.encode()  # a cheap test before a line is parsed


def path_for(run_dir: Path, worker: str) -> Path:
    return Path(run_dir) / f"{worker}{SUFFIX}"


def started_count(run_dir: Path, job: int) -> int:
    """How many executions of *job* have logged ``started`` in the run so far, every worker's log read
    (a transient fault's count). Two executions starting at the same instant may both count each other."""
    n = 0
    for p in Path(run_dir).glob(f"*{SUFFIX}"):
        try:
            n += count_started(p.read_bytes(), job)
        except OSError:
            continue
    return n


def count_started(data: bytes, job: int | None = None) -> int:
    """The ``started`` records in *data* (one log's bytes), of *job* or of any; a torn line is none."""
    n = 0
    for line in data.splitlines():
        if _STARTED in line:  # whatever the writer's spacing (each runtime writes its own)
            try:
                r = jsonline.loads(line)
            except ValueError:
                continue
            n += r.get("event") == LogEvent.STARTED and (job is None or r.get("job") == job)
    return n


def parse_lines(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """Complete lines of *data* as records, and how many bytes they used (a torn tail waits)."""
    out = []
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        if line.strip():
            try:
                out.append(jsonline.loads(line))
            except ValueError:  # a torn line can only come from a write cut mid-way: skip it
                continue
    return out, end


def read_new(path: Path, offset: int) -> tuple[bytes, bytes] | None:
    """The complete lines of *path* after *offset*, and the torn tail after them (None: unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return None
    end = data.rfind(b"\n") + 1
    return data[:end], data[end:]


class Tail:
    """Incremental reader of every log file in a directory (the supervisor polls it)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.offsets: dict[Path, int] = {}

    def poll(self) -> list[dict[str, Any]]:
        new = []
        for p in sorted(self.run_dir.glob(f"*{SUFFIX}")):
            off = self.offsets.get(p, 0)
            got = read_new(p, off)
            if got is None:
                continue
            recs, used = parse_lines(got[0])
            self.offsets[p] = off + used
            new.extend(recs)
        new.sort(key=lambda r: r["t"])
        return new

