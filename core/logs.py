"""Human-readable logs of the supervisor and its workers, safe under SIGKILL and ``os._exit``.

Workers are forked and die at arbitrary moments, so no log channel may be *shared* between
processes: a lock or a pipe stream shared with a process that can be SIGKILLed mid-write is a
lock nobody releases and a stream nobody can resynchronise. (``multiprocessing-logging``, which
the card named, is exactly that: one ``multiprocessing.Queue`` whose cross-process write lock a
dying worker can take to its grave -- ``benchmarks/mp_logging_kill.py`` measures it.) Instead:

* the parent (:func:`setup`) logs through ordinary handlers on the root logger, one line per
  record: time, level, process identity (``supervisor[pid]`` or ``w1.0[pid]``), logger name;
* each worker (:func:`worker_setup`, first thing after the fork) drops every inherited handler
  and logs to a file of its own, ``<run_dir>/<identity>.log.jsonl``, one JSON object per line,
  each written with a single unbuffered ``os.write`` on an ``O_APPEND`` descriptor. A kill can
  at worst tear that worker's own last line; nobody else waits on it or reads past it;
* the supervisor polls a :class:`Merger` (periodically and at the end) to tail those files and
  re-emit each worker line through its own handlers, with the worker's time, level, logger name
  and identity.

These logs are for humans. The history and the properties never read them (they read the
execution log, :mod:`core.execlog`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import weakref
from pathlib import Path
from typing import TextIO

from .execlog import read_new

SUFFIX = ".log.jsonl"
FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-7s %(who)s[%(process)s] %(name)s: %(message)s"
DATEFMT = "%H:%M:%S"
PARENT = "supervisor"
# The handlers setup() installed in this process: the one a second call replaces.
_OURS: weakref.WeakSet[logging.Handler] = weakref.WeakSet()


TAIL_BYTES = 64 * 1024  # how much of a worker's log last_lines reads, from its end
LINE_CHARS = 300  # a last line is cut to this many characters (a message's first line: no traceback)


def path_for(run_dir: Path, identity: str) -> Path:
    return Path(run_dir) / f"{identity}{SUFFIX}"


def last_lines(run_dir: Path, identity: str) -> tuple[str | None, str | None]:
    """What a worker's log ended with: ``(last, warning)`` -- the message of its last complete line and,
    when an earlier line of the last :data:`TAIL_BYTES` was logged at WARNING or above, the last such
    message (None when there is none, or it is the last line itself). Each is its message's first line
    (a logged exception's traceback follows it), cut to :data:`LINE_CHARS`. ``(None, None)`` for a log
    that is missing or empty. Read by the supervisor once the worker has exited (nothing writes it then)."""
    try:
        with open(path_for(run_dir, identity), "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read()
    except OSError:
        return None, None
    lines = data.splitlines()[1 if size > TAIL_BYTES else 0:]  # the first may be cut by the seek
    last = warning = None
    for line in lines:
        try:
            d = json.loads(line)
            msg = str(d["msg"]).split("\n", 1)[0][:LINE_CHARS]
            level = int(d["level"])
        except (ValueError, KeyError, TypeError):
            continue  # a torn line (a kill mid-write), or not ours
        last = msg
        if level >= logging.WARNING:
            warning = msg
    return last, (warning if warning != last else None)


class _Identity(logging.Filter):
    """Tags records made in this process with its identity (merged worker records carry theirs)."""

    def __init__(self, who: str):
        super().__init__()
        self.who = who

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "who"):
            record.who = self.who
        return True


def _formatter() -> logging.Formatter:
    return logging.Formatter(FORMAT, DATEFMT)


def setup(level: int, *, stream: TextIO | None = None) -> None:
    """The parent's logging: one human-readable stream handler on the root logger.

    Idempotent: a second call replaces the handler this module installed, not the others.
    """
    root = logging.getLogger()
    for h in list(root.handlers):
        if h in _OURS:
            root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    _OURS.add(handler)
    handler.setFormatter(_formatter())
    handler.addFilter(_Identity(PARENT))
    root.addHandler(handler)
    root.setLevel(level)


class WorkerFileHandler(logging.Handler):
    """One JSON line per record, one ``os.write`` per line, ``O_APPEND``, no buffer, nothing shared."""

    def __init__(self, path: Path, identity: str):
        super().__init__()
        self.identity = identity
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
            if record.exc_info:
                msg = f"{msg}\n{logging.Formatter().formatException(record.exc_info)}"
            elif record.exc_text:
                msg = f"{msg}\n{record.exc_text}"
            if record.stack_info:
                msg = f"{msg}\n{record.stack_info}"
            line = json.dumps({"t": record.created, "level": record.levelno, "name": record.name,
                               "pid": record.process, "who": self.identity, "msg": msg}, default=str)
            data = (line + "\n").encode("utf-8", "backslashreplace")
            while data:  # a regular file takes it all at once; the loop is for the pathological case
                data = data[os.write(self.fd, data):]
        except Exception:
            self.handleError(record)

    def close(self) -> None:
        try:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
        finally:
            super().close()


def worker_setup(run_dir: Path, identity: str) -> None:
    """A forked worker's logging. Call first thing after the fork, before anything logs.

    Every handler inherited from the parent is dropped (not closed, not flushed: they are the
    parent's), on the root logger and on any named logger, so nothing in the child writes to a
    stream, lock or queue it shares with another process. The root level is kept as inherited.
    """
    drop_inherited()
    handler = WorkerFileHandler(path_for(run_dir, identity), identity)
    logging.getLogger().addHandler(handler)


def drop_inherited() -> None:
    """Drop every handler inherited from the parent (see :func:`worker_setup`): until a handler is added,
    what the child logs goes nowhere (a standby worker has no run directory yet)."""
    loggers = [logging.getLogger()] + [lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger)]
    for lg in loggers:
        for h in list(lg.handlers):
            lg.removeHandler(h)


class Merger:
    """Tails the worker log files of one run directory and re-emits their lines in this process."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.offsets: dict[Path, int] = {}

    def poll(self, *, final: bool = False) -> int:
        """Forward every complete new line; with *final*, also report torn last lines. Returns a count."""
        n = 0
        for p in sorted(self.run_dir.glob(f"*{SUFFIX}")):
            off = self.offsets.get(p, 0)
            got = read_new(p, off)
            if got is None:
                continue
            complete, torn = got
            who = p.name[: -len(SUFFIX)]
            for line in complete.splitlines():
                if line.strip():
                    _emit(line, who)
                    n += 1
            used = len(complete)
            if final and torn:
                _emit_raw(who, f"torn last log line (process ended mid-write): {torn[:200]!r}")
                used += len(torn)
                n += 1
            self.offsets[p] = off + used
        return n


def _emit(line: bytes, who: str) -> None:
    try:
        d = json.loads(line)
        rec = logging.makeLogRecord({
            "name": str(d["name"]), "levelno": int(d["level"]),
            "levelname": logging.getLevelName(int(d["level"])),
            "msg": str(d["msg"]), "args": None, "created": float(d["t"]), "process": d.get("pid"),
            "processName": d.get("who", who), "who": d.get("who", who)})
        rec.msecs = (rec.created - int(rec.created)) * 1000
    except (ValueError, KeyError, TypeError):
        _emit_raw(who, f"unreadable log line: {line[:200]!r}")
        return
    logger = logging.getLogger(rec.name)
    if logger.isEnabledFor(rec.levelno):
        logger.handle(rec)


def _emit_raw(who: str, msg: str) -> None:
    rec = logging.makeLogRecord({"name": "pgjc.logs", "levelno": logging.WARNING, "levelname": "WARNING",
                                 "msg": msg, "args": None, "who": who, "process": "?"})
    logging.getLogger("pgjc.logs").handle(rec)

