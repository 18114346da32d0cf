"""The job body on the worker's own connection: the user's tenant code under test, observed.

A hosted design whose worker gives each job a connection of its own (its pool, its tenant
decorator, its transactions) passes that connection to :func:`~workers.hosted.run_job` as
``conn=``. The body then runs on it **as it is**: it sets no tenant, opens no transaction of its
own, commits nothing and sets no session state. It only observes, in the one statement that is
also the job's read (``own_connection.sql: observe``): the design's tenant setting as the job's
code begins (``HostedDesign.tenant_setting``, ``app.tenant`` by default; the invoices' row-level
security policy is made to read the same setting), the server session, and how many invoices
the job saw and how many of them were another tenant's. ``tenant-isolation`` then judges the
user's code: a job must begin with exactly its own tenant (a system job with none) and see
exactly its tenant's rows.

Which execution last used a server session is derived from the server pids in the history, not
from a session marker (the harness's own body sets one: here it could hide the leak it looks for).

Order: ``started``; observe and read; ``before-tenant`` (named as the harness body's point after its
inherited read: here the worker's tenant code has run and the job has read); the job's own code when
``run_job`` was given it (``work=``: its statements, on any connection, are the job's, each judged by
the tenant setting in force when it ran: ``workers/body/statements.py``); the work (``mid-work``);
the side effect (``after-effect``); ``before-finish``; the ``job_runs`` row, in the worker's
transaction (``after-insert`` then lies before the worker's commit, unless its connection is in
autocommit). Every statement is sent with client-side literals (the simple query protocol). Raises
what the body raised; the worker's own code rolls back or commits, and tells its queue.
"""

from __future__ import annotations

import re

import psycopg
from psycopg import sql

from ...core import sqlfile
from ...core.db import one
from ...core.errors import UsageError
from ..tenant.modes import SETTING

Q = sqlfile.load(__file__, "own_connection.sql", "observe", "insert_finished_run")

DEFAULT_SETTING = SETTING  # the harness's tenant modes' (workers/tenant/modes.py)
_SETTING = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)+")


def check_setting(name: str) -> str:
    """*name* if it can be a custom setting (``prefix.name``, as PostgreSQL requires), else UsageError."""
    if not isinstance(name, str) or not _SETTING.fullmatch(name):
        raise UsageError(f"tenant_setting {name!r}: a custom setting needs a dotted name such as app.tenant")
    return name


def run_on(ctx, conn: psycopg.Connection, job, work=None) -> None:
    """One execution of *job* on the worker's own *conn* (see the module docstring). *work* (a callable
    of no arguments; ``run_job``'s, on this path or the pool's): the job's own code, called inside the
    execution after the body's first read and ``before-tenant``, so that its statements, on any
    connection, are the job's, each judged by ``tenant-isolation`` by the tenant setting in force when
    it ran (``workers/body/statements.py``)."""
    run_until_commit(ctx, conn, job, work).committed()  # nothing commits between: the worker's own


class Uncommitted:
    """An execution whose ``job_runs`` row waits in the worker's open transaction
    (:func:`run_until_commit`): the worker says how its commit ended."""

    def __init__(self, ex):
        self.ex = ex

    def committed(self) -> None:
        """The worker's commit returned: ``after-insert`` strikes (now after the commit), then
        ``finished``; raises what the point raised (``failed`` logged)."""
        try:
            self.ex.point("after-insert")
        except BaseException as exc:
            self.ex.failed(exc)
            raise
        self.ex.finished()

    def rolled_back(self, exc: BaseException) -> None:
        """The worker's commit failed, or it ran the transaction again: this execution ``failed``."""
        self.ex.failed(exc)


def run_until_commit(ctx, conn: psycopg.Connection, job, work=None) -> Uncommitted:
    """:func:`run_on` for a worker that commits the body's transaction itself once the body has
    returned (a library's transactional step, whose own checkpoint commits with it: DBOS's datasource
    transaction). The same steps on *conn*, up to and with the ``job_runs`` insert, nothing committed;
    the worker then calls :meth:`Uncommitted.committed` after its commit -- so ``after-insert`` lies
    after the commit, as in the harness's own body -- or :meth:`Uncommitted.rolled_back`. Raises what
    the body raised (``failed`` logged). *work*: as :func:`run_on`'s, which is this and ``committed``."""
    setting = check_setting(ctx.spec.tenant_setting)
    ex = ctx.execution(conn, job)
    try:
        ex.started(own_tenant=True)
        tenant = sql.Literal(job.tenant) if job.tenant is not None else sql.SQL("null")
        seen, pid, visible, foreign = one(conn.execute(
            sql.SQL(Q.observe).format(setting=sql.Literal(setting), tenant=tenant)))
        ctx.log.write("tenant-seen", job=job.id, attempt=job.attempt, tenant=job.tenant, setting=setting,
                      value=seen, backend=pid, visible=visible, foreign=foreign)
        # As the harness's body has it after its inherited read: what the connection carried is recorded
        # before anything can strike.
        ex.point("before-tenant")
        started = one(conn.execute("select clock_timestamp()"))[0]
        if work is not None:
            work()
        ex.work()
        ex.effect()
        ex.point("before-finish")
        conn.execute(sql.SQL(Q.insert_finished_run).format(
            job=sql.Literal(job.id), worker=sql.Literal(ctx.identity), attempt=sql.Literal(job.attempt),
            started=sql.Literal(started)))
    except BaseException as exc:
        ex.failed(exc)
        raise
    return Uncommitted(ex)
