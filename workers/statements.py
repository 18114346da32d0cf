"""Strike points between a design's own statements.

In a forked worker, every statement a design sends through psycopg -- the claim, the finish, a
failure's update, the heartbeat, a sweep, and a hosted library's own statements -- is a point the
supervisor can strike at: ``sql:<name>``, the name being the statement's in its ``.sql`` file
(``sql:lease.claim``) or, for a statement that is in none (a library's, a user's inline SQL), a
stable digest of its text (``sql:3f9a1c2e``; for a composed statement, of its SQL parts only, so
literals do not change it). The job body's own statements (``workers/body.py``, ``own_connection``,
``hosted``) are not points: the body has named points of its own.

A point is keyed as the body's are: ``(job, point)`` and its occurrence in the run, the job being
the one this thread is running or last ran (None for a worker that has run none yet: a maintenance
statement, a first claim). Each worker logs the first time it sends each statement (``statement``:
point, job-bound or not), so a search learns which points a design has; only the points the
schedule's events name wait (``WorkerSpec.watch``). From asyncio the wait runs in a thread: a
library's event loop is never blocked in it (its heartbeat would freeze with it).

Installed by the worker process (``install``) by wrapping ``psycopg.Cursor.execute`` / ``executemany``
and their async twins; the supervisor's own connections are in another process and never pass here.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import sys
import threading
from types import FrameType

import psycopg
from psycopg import sql

from ..core.events import LogEvent
from ..core.sqlfile import NAMES, normalized

PREFIX = "sql:"
# The body's files (and the tenant modes' reset callbacks): the job's statements, with named points of
# their own.
BODY_FILES = tuple(os.path.join("workers", *name.split("/")) for name in (
    "body.py", "context.py", "statements.py", "tenant.py", "hosted/own_connection.py", "hosted/protocol.py"))
# Statements the body sends inline (read_briefly's start time, a transaction opened by hand).
BODY_TEXTS = {"select clock_timestamp()", "begin", "commit", "rollback"}

_local = threading.local()
_ctx = None  # the worker's WorkerContext, once installed


def set_current(job) -> None:
    """The job this thread now runs (kept after it ends: the job it last ran)."""
    _local.job = job


def current():
    return getattr(_local, "job", None)


def _text(query) -> str | None:
    if isinstance(query, str | bytes):
        return query.decode() if isinstance(query, bytes) else query
    if isinstance(query, sql.SQL):
        return query._obj  # noqa: SLF001 - its template
    if isinstance(query, sql.Composed):
        return " ".join(_text(part) or "?" for part in query._obj)  # noqa: SLF001 - literals as ?
    return None


def name_of(query) -> str | None:
    """``sql:<name>`` of *query*, or None when it is not a point (the body's, or unreadable)."""
    text = _text(query)
    if text is None:
        return None
    key = normalized(text)
    if key.lower() in BODY_TEXTS:
        return None
    name = NAMES.get(key)
    if name is not None:
        return PREFIX + name
    return PREFIX + hashlib.sha1(key.encode()).hexdigest()[:8]


def _from_body() -> bool:
    """Whether the statement comes from the job body (the first frame outside psycopg is in it)."""
    f: FrameType | None = sys._getframe(3)
    while f is not None and "/psycopg" in f.f_code.co_filename:
        f = f.f_back
    return f is not None and f.f_code.co_filename.endswith(BODY_FILES)


def _before(cursor, query) -> tuple[str, object] | None:
    """Log the first sighting; return (point, job) when the supervisor watches it."""
    ctx = _ctx
    if ctx is None or _from_body():
        return None
    point = name_of(query)
    if point is None:
        return None
    job = current()
    seen = ctx.statements_seen
    key = (point, job is not None)
    if key not in seen:
        seen.add(key)
        ctx.log.write(LogEvent.STATEMENT, point=point, job=getattr(job, "id", None), bound=job is not None)
    if (getattr(job, "id", None), point) in ctx.spec.watch:
        return point, job
    return None


def _wait(cursor, hit) -> None:
    point, job = hit
    try:
        backend = cursor.connection.info.backend_pid
    except Exception:
        backend = None
    ctx = _ctx
    assert ctx is not None  # _before finds a point only once install() has set it
    ctx.wait_for_supervisor(job, point, backend)


def _wrap_sync(method):
    @functools.wraps(method)
    def execute(self, query, *args, **kwargs):
        hit = _before(self, query)
        if hit is not None:
            _wait(self, hit)
        return method(self, query, *args, **kwargs)
    return execute


def _wrap_async(method):
    @functools.wraps(method)
    async def execute(self, query, *args, **kwargs):
        hit = _before(self, query)
        if hit is not None:
            await asyncio.to_thread(_wait, self, hit)  # never on the event loop's thread
        return await method(self, query, *args, **kwargs)
    return execute


def install(ctx) -> None:
    """Make every statement of this process a point (once per process; the worker's context)."""
    global _ctx
    _ctx = ctx
    # Hazard: a forked worker inherits its parent's thread-local -- a parent that ran a design
    # in-process (run.py bench's cost figures) left its last job there, and every statement of the
    # worker would be taken for that job's (bound), the job-less claim never struck at as such.
    set_current(None)
    if getattr(psycopg.Cursor.execute, "_pgjc", False):
        return
    for cls, wrap in ((psycopg.Cursor, _wrap_sync), (psycopg.AsyncCursor, _wrap_async)):
        for name in ("execute", "executemany"):
            wrapped = wrap(getattr(cls, name))
            wrapped._pgjc = True
            setattr(cls, name, wrapped)
