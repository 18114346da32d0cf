"""Strike points between a design's own statements.

In a forked worker, every statement a design sends through psycopg -- the claim, the finish, a
failure's update, the heartbeat, a sweep, and a hosted library's own statements -- is a point the
supervisor can strike at: ``sql:<name>``, the name being the statement's in its ``.sql`` file
(``sql:lease.claim``) or, for a statement that is in none (a library's, a user's inline SQL), a
stable digest of its text (``sql:3f9a1c2e``; for a composed statement, of its SQL parts only, so
literals do not change it). The job body's own statements (``workers/body/execution.py``, ``own_connection``,
``hosted``) are not points: the body has named points of its own.

A point is keyed as the body's are: ``(job, point)`` and its occurrence in the run, the job being
the one this thread is running or last ran (None for a worker that has run none yet: a maintenance
statement, a first claim). Each worker logs the first time it sends each statement (``statement``:
point, job-bound or not), so a search learns which points a design has; only the points the
schedule's events name wait (``WorkerSpec.watch``). From asyncio the wait runs in a thread: a
library's event loop is never blocked in it (its heartbeat would freeze with it).

Every statement also passes the tenant tracking (``workers/tenant/track.py``: the design's tenant
setting in force on each connection, worked out client-side from the statements and the connection's
own transaction commands, which are wrapped too), the body's included. A statement that is not the
body's, sent while this thread runs a job, is logged once per execution with the setting in force when
it ran (``tenant-statement``: the statement's text, its value, or ``known`` false), so that
``tenant-isolation`` judges the user's own statements, whatever table they read
(``core/statement_tenants.py`` keeps those between the execution's start and end records only: a
thread keeps its last job as current after it ended, and its next claim is no statement of that job).
Each custom setting the worker's own code sets by name (``SET``, ``set_config``) is logged once per worker
(``setting-set``, beside the declared ``tenant_setting``): a tenant code that sets another setting than the
one declared is then said (``core/misdeclared.py``), not only judged as jobs run without their tenant.

Around each such statement: ``sql:<name>`` before it is sent, ``sql:<name>:after`` once its reply came
(in autocommit: once it committed); every COMMIT (``conn.commit()``, leaving ``conn.transaction()``, the
body's too, a ``commit`` statement): ``sql:commit:<last>`` and ``sql:commit:<last>:after``, named by the
transaction's last named statement (the body's too; ``sql:commit`` for none). A job fault that ends the
worker (``crash``: ``cuts_worker``) whose job names such a point strikes here. An async connection's
``conn.commit()`` is no point: it runs on the library's event loop, which a wait would block.

Installed by the worker process (``install``) by wrapping ``psycopg.Cursor.execute`` / ``executemany``
and their async twins, and the connection's ``_exec_command`` (its BEGIN, COMMIT, ROLLBACK and
savepoints); the supervisor's own connections are in another process and never pass here.
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

from ...core.events import LogEvent
from ...core.execlog import started_count
from ...core.schedule import AFTER, COMMIT
from ...core.setting_sql import calls_set_config, settings_named
from ...core.sqlfile import NAMES, normalized
from ...faults.catalogue import CATALOGUE
from ..tenant import track as tenant_track

PREFIX = "sql:"
# The body's files (and the tenant modes' reset callbacks): its statements have named points of their own.
BODY_FILES = tuple(os.path.join("workers", *name.split("/")) for name in (
    "body/execution.py", "body/context.py", "body/statements.py", "tenant/modes.py",
    "hosted/own_connection.py", "hosted/protocol.py"))
# Statements the body sends inline (read_briefly's start time, a transaction opened by hand), and the
# empty statement of the body pool's check before it lends a connection (workers/tenant/modes.py).
BODY_TEXTS = {"select clock_timestamp()", "begin", "commit", "rollback", ""}

_LAST = "_pgjc_last_statement"  # on a connection: the last named statement of its open transaction
STATEMENT_CHARS = 120  # of a statement's text in its tenant-statement record (the evidence quotes it)

_local = threading.local()
_ctx = None  # the worker's WorkerContext, once installed


def set_current(job) -> None:
    """The job this thread now runs (kept after it ends: the job it last ran)."""
    _local.job = job
    _local.logged = set()  # the (statement, value) pairs logged for this execution
    _local.open = True  # its statements are logged with their tenant until it ends


def ended() -> None:
    """The execution this thread ran has written its end record: its job stays current (the points of
    the next claim are keyed by it), but nothing more is logged as its statement -- the history keeps
    only those before the end (``core/statement_tenants.py``), a record a job was one write too many."""
    _local.open = False


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
    return None if (text := _text(query)) is None else _name_of(text, len(NAMES))


@functools.lru_cache(maxsize=4096)  # a worker sends a few texts thousands of times; NAMES only grows
def _name_of(text: str, _names: int) -> str | None:
    key = normalized(text)
    if key.lower() in BODY_TEXTS:
        return None
    name = NAMES.get(key)
    return PREFIX + (name if name is not None else hashlib.sha1(key.encode()).hexdigest()[:8])


@functools.lru_cache(maxsize=4096)
def _after_point(point: str) -> str:
    """The point once *point*'s statement has its reply (one string per point, not one per statement)."""
    return point + AFTER


def _from_body() -> bool:
    """Whether the statement comes from the job body (the first frame outside psycopg is in it)."""
    f: FrameType | None = sys._getframe(3)
    while f is not None and "/psycopg" in f.f_code.co_filename:
        f = f.f_back
    return f is not None and f.f_code.co_filename.endswith(BODY_FILES)


def _before(cursor, query, params, many: bool) -> tuple[tuple[str, object] | None, list | None]:
    """Track the tenant setting and log a job's statement with it; log the first sighting of a point.
    Returns (point, job) when the statement is a point, and the setting changes the statement makes
    (applied once it succeeded: :func:`_after`)."""
    ctx = _ctx
    if ctx is None:
        return None, None
    body = _from_body()
    text = _text(query)
    try:
        found = (tenant_track.statement_changes(ctx.spec.tenant_setting.lower(), cursor.connection, query,
                                                text, params, many) if text is not None else None)
    except Exception:  # noqa: BLE001 - Hazard: never raise into the user's statement; say unknown
        found = [("unknown", tenant_track.UNKNOWN)]
    if text is None:
        return None, found
    point = _name_of(text, len(NAMES))
    if point is not None:  # the COMMIT point's name: the transaction's last named statement, the body's too
        setattr(cursor.connection, _LAST, point)
    elif normalized(text).lower() == "commit" and not body:  # a COMMIT sent as a statement
        point = _commit_point(cursor.connection)
    if body:
        return None, found
    try:
        _log_settings(ctx, cursor, query, text)
    except Exception:  # noqa: BLE001 - Hazard: never raise into the user's statement; the record is a hint
        pass
    job = current()
    if job is not None and not found and getattr(_local, "open", True):
        _log_statement(ctx, cursor, job, text)
    return ((point, job) if point is not None else None), found


def _commit_point(conn) -> str:
    """``sql:commit:<last named statement>`` of *conn*'s transaction, which it then forgets."""
    last = getattr(conn, _LAST, None)
    setattr(conn, _LAST, None)
    return COMMIT + (":" + last[len(PREFIX):] if last else "")


def _stops(point: str, job) -> bool:
    """Log the first sighting of *point*; whether anything strikes there (a watched point, a crash)."""
    ctx = _ctx
    if ctx is None:
        return False
    key = (point, job is not None)
    if key not in ctx.statements_seen:
        ctx.statements_seen.add(key)
        ctx.log.write(LogEvent.STATEMENT, point=point, job=getattr(job, "id", None), bound=job is not None)
    return (getattr(job, "id", None), point) in ctx.spec.watch or _crash_due(ctx, job, point) is not None


def _crash_due(ctx, job, point: str):
    """The job's own fault when it ends the worker at *point* on this execution (``crash``), else None."""
    fault = CATALOGUE.get(getattr(job, "fault", None) or "") if getattr(job, "point", None) == point else None
    if fault is None or fault.kind != "job" or not fault.cuts_worker or fault.strike is None:
        return None
    strikes = getattr(job, "strikes", None)
    return None if strikes is not None and started_count(ctx.spec.run_dir, job.id) > strikes else fault


def _arrive(conn, point: str, job) -> None:
    """At a point something strikes at: the supervisor's wait, then the job's own crash."""
    ctx = _ctx
    if ctx is None:
        return
    if (getattr(job, "id", None), point) in ctx.spec.watch:
        ctx.wait_for_supervisor(job, point, None if conn.closed else conn.info.backend_pid)
    fault = _crash_due(ctx, job, point)
    if fault is not None:
        ctx.log.write(LogEvent.FAULT, job=job.id, attempt=getattr(job, "attempt", None), fault=fault.name,
                      point=point)
        fault.strike(None)  # the worker ends here (crash: os._exit)


def _log_statement(ctx, cursor, job, text: str) -> None:
    """One ``tenant-statement`` record per execution, statement and value in force. Behind a
    transaction pooler none unless the value was set in the statement's own transaction: between
    transactions the server session, and its setting, are not this connection's."""
    pooler = getattr(getattr(ctx, "schedule", None), "pooler", None)
    if pooler is not None and ":session" not in pooler and not tenant_track.set_here(cursor.connection):
        return
    value = tenant_track.in_force(cursor.connection)
    logged = getattr(_local, "logged", None)
    if logged is None:
        logged = _local.logged = set()
    key = (text, value)
    if key in logged:
        return
    logged.add(key)
    ctx.log.write(LogEvent.TENANT_STATEMENT, job=job.id, attempt=job.attempt, setting=ctx.spec.tenant_setting,
                  statement=" ".join(text.split())[:STATEMENT_CHARS], value=value,
                  known=value is not tenant_track.UNKNOWN)


def _log_settings(ctx, cursor, query, text: str) -> None:
    """One ``setting-set`` record per worker and custom setting its own code sets by name (``SET``,
    ``set_config``; not the body's), with the design's declared ``tenant_setting`` beside it:
    ``core/misdeclared.py`` tells a worker whose tenant code sets another setting than the one declared.
    A composed statement's literals are ``?`` in *text*: its full text is read only when it calls
    ``set_config``."""
    names = settings_named(text)  # cached by text: a worker sends the same few
    if not names and isinstance(query, sql.Composed) and calls_set_config(text):
        full = tenant_track.text_of(query, cursor.connection)
        names = settings_named(full) if full is not None else ()
    for name in names:
        if name not in ctx.settings_seen:
            ctx.settings_seen.add(name)
            job = current()
            ctx.log.write(LogEvent.SETTING_SET, setting=name, declared=ctx.spec.tenant_setting,
                          job=getattr(job, "id", None), statement=" ".join(text.split())[:STATEMENT_CHARS])


def _after(cursor, found) -> None:
    """The statement succeeded: apply its changes, or notice a transaction that ended unseen."""
    if found:
        tenant_track.applied(cursor.connection, found)
    elif _ctx is not None:
        tenant_track.settle(cursor.connection)


def _params(args: tuple, kwargs: dict, many: bool):
    return args[0] if args else kwargs.get("params_seq" if many else "params")


def _wrap_sync(method, many: bool):
    @functools.wraps(method)
    def execute(self, query, *args, **kwargs):
        hit, found = _before(self, query, _params(args, kwargs, many), many)
        if hit is not None and _stops(*hit):
            _arrive(self.connection, *hit)
        result = method(self, query, *args, **kwargs)
        _after(self, found)
        if hit is not None and _stops(after := _after_point(hit[0]), hit[1]):
            _arrive(self.connection, after, hit[1])
        return result
    return execute


def _wrap_async(method, many: bool):
    @functools.wraps(method)
    async def execute(self, query, *args, **kwargs):
        hit, found = _before(self, query, _params(args, kwargs, many), many)
        if hit is not None and _stops(*hit):
            await asyncio.to_thread(_arrive, self.connection, *hit)  # never on the event loop's thread
        result = await method(self, query, *args, **kwargs)
        _after(self, found)
        if hit is not None and _stops(after := _after_point(hit[0]), hit[1]):
            await asyncio.to_thread(_arrive, self.connection, after, hit[1])
        return result
    return execute


def _wrap_command(method):
    """The connection's own commands (psycopg's generator): a sync connection's COMMIT is a point."""
    @functools.wraps(method)
    def _exec_command(self, command, *args, **kwargs):
        commit = _ctx is not None and command == b"COMMIT" and not isinstance(self, psycopg.AsyncConnection)
        point, job = (_commit_point(self), current()) if commit else ("", None)
        if commit and _stops(point, job):
            _arrive(self, point, job)
        result = yield from method(self, command, *args, **kwargs)
        if _ctx is not None:
            tenant_track.command(self, command)
            if command in (b"COMMIT", b"ROLLBACK"):
                setattr(self, _LAST, None)
        if commit and _stops(after := _after_point(point), job):
            _arrive(self, after, job)
        return result
    return _exec_command


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
            wrapped = wrap(getattr(cls, name), name == "executemany")
            wrapped._pgjc = True
            setattr(cls, name, wrapped)
    # Hazard: a private psycopg method (3.1 to 3.3): every transaction command the connection sends
    # itself goes through it; a psycopg without it leaves commit/rollback unseen (settle: unknown).
    base = psycopg.Connection.__mro__[1]
    if hasattr(base, "_exec_command"):
        base._exec_command = _wrap_command(base._exec_command)
