"""django-tasks-db 0.13.0 (the ORM/database backend of Django's Tasks framework) hosted under protocol v2.

On Python 3.11 Django 6 (``django.tasks``) is out: Django 5.2 with the framework's backport,
``django-tasks`` 0.12.0, which ``django-tasks-db[compat]`` imports (``django_tasks_db/compat.py:32-81``).
What runs is the library's own code, configured as its README configures it, never patched (lines of
the installed ``django_tasks_db`` 0.13.0 and ``django_tasks`` 0.12.0):

- settings (:func:`settings_for`): its README's, one database (psycopg 3), Django's defaults otherwise
  (``CONN_MAX_AGE`` 0, ``DEBUG`` off); ``LOGGING_CONFIG`` None: the harness owns the process's logging.
- schema: its migrations by ``migrate`` (``call_command``) as the owner, in a child interpreter; the
  worker role gets DML on its table (``django_tasks_database_dbtaskresult``), no more.
- enqueue: ``harness_job.enqueue(**args)`` (``django_tasks/base.py`` ``Task.enqueue`` ->
  ``backend.py:405``, ``DBTaskResult.objects.create``), all jobs in one ``transaction.atomic()``, in a
  child interpreter as the owner, kept for the supervisor's life (:class:`Enqueuer`). Hazard: Django's
  state (settings, its connections) must not exist in the supervisor before it forks the workers -- a
  worker's Django is configured for its own DSN (a proxied one under network faults) and a configured
  process cannot be configured again.
- worker: its documented ``db_worker`` command (``call_command``; ``management/commands/db_worker.py``)
  at its defaults -- one task at a time per process, ``--interval`` 1 s scaled (:data:`TIMING`), its
  startup delay on -- with ``--worker-id`` the worker's identity (documented: unique in the pool) and
  ``--max-tasks`` the schedule's dequeue budget (its own graceful stop, ``db_worker.py:145-151``).

What it does under faults, from its source (no retry, no recovery, no fence):

- a task that raises: ``run_task`` catches ``BaseException`` and ``set_failed`` (``db_worker.py:190-191``,
  ``models.py:283-299``): FAILED for good. Neither django-tasks-db nor the Task API has a retry option
  (``Task`` fields: priority, queue, backend, run_after, takes_context); Django's docs
  (``docs/topics/tasks.txt``, "Errors") say a Task that raises has its error saved to ``errors``. So
  ``max_attempts`` has nothing to set: every job runs at most once.
- a worker that dies mid-task: its row stays RUNNING for ever. The claim is ``status = RUNNING`` saved
  (``models.py:256-263``); the loop fetches only READY rows (``models.py:109-117``, ``db_worker.py:110``);
  nothing in the package resets a RUNNING row (no heartbeat, no stale-task sweep).
- the claim is one transaction of two statements (``db_worker.py:116-123``): ``SELECT ... FOR UPDATE
  SKIP LOCKED`` (``models.py:131-135``, an xid for the row lock), then the claim's UPDATE; a worker
  stalled between them holds the xmin horizon back for as long as it stalls.
- ``pending`` counts a RUNNING row while its claimer's connection (``application_name``
  ``<identity>/queue``) is open: the only party that will ever finish it (``django_tasks.sql``).
- the finish is ``save(update_fields=...)`` by primary key alone (``models.py:265-299``), not matched
  on status or worker: unfenced, though with one claim per row there is nothing to fence off.

Cost: Django's default ``CONN_MAX_AGE`` 0 and ``close_old_connections`` at each turn of the loop
(``db_worker.py:108``, ``155``): a new session per task and idle poll (measured: 28 for 20 jobs, 2 workers).

Attempts: the library keeps no counter; ``worker_ids`` gets one entry per claim (``models.py:262``) and
``TaskContext.attempt`` is its length (``django_tasks/base.py:335-363``): what the body is told and
what ``final_states`` reports. ``lease_expired`` is None: the library has no lease.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import IO, TYPE_CHECKING

import django_tasks  # noqa: F401 -- the library at import: --design without it is a usage error
import django_tasks_db  # noqa: F401
from psycopg import conninfo

from ..core import procs, sqlfile
from ..workers import hosted
from ..workers.hosted.declared import DeclaredDesign, admin_dsn, grant
from ..workers.hosted.timing import FIXED, WAIT, Interval, Intervals

if TYPE_CHECKING:  # for the annotations: _bind_task imports them once Django is configured
    from django_tasks.base import Task, TaskContext

Q = sqlfile.load(__file__, "django_tasks.sql", "grantable", "reset", "pending", "final_states",
                 "accepted_finishes")

TIMING = Intervals("django-tasks-db", anchors={"poll": "interval"}, intervals=(
    Interval("interval", 1.0, anchor="poll", setting="db_worker --interval 1"),
    # db_worker.py:102-104: time.sleep(random.random()) once at start, whatever --interval is (not 0).
    # A restarted worker waits up to 1 s real before its first fetch: a delay, nothing it decides
    # (reported), but the run's stall limit must outlast it (recovery=True stretches it by 1 s).
    Interval("startup delay", 1.0, anchor="poll", grid=FIXED, kind=WAIT, bound=None, recovery=True,
             setting="db_worker startup delay: random.random() s, fixed"),
    # utils.py:53 retry(retries=3, backoff_delay=0.1): a finish's save that raised is tried again
    # 0.1 s later. Only under database faults; reported.
    Interval("finish save retry", 0.1, anchor="poll", grid=FIXED, kind=WAIT, bound=None,
             setting="utils.retry(backoff_delay=0.1) on set_successful / set_failed"),
))

# The child interpreter's script: Django is set up there, never in the supervisor (see the docstring).
CHILD = ("import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
         "from pg_job_chaos.adapters import django_tasks; django_tasks.child(sys.argv[2], int(sys.argv[3]))")


def settings_for(dsn: str, **options: str) -> dict:
    """Django settings for the database *dsn* names, as django-tasks-db's README configures it."""
    p = {**conninfo.conninfo_to_dict(dsn), **options}
    database = {"ENGINE": "django.db.backends.postgresql", "NAME": p.pop("dbname", ""),
                "USER": p.pop("user", ""), "PASSWORD": p.pop("password", "") or "",
                "HOST": p.pop("host", ""), "PORT": p.pop("port", ""), "OPTIONS": p}
    return {"DATABASES": {"default": database},
            "INSTALLED_APPS": ["django_tasks", "django_tasks_db"],
            "TASKS": {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}},
            "LOGGING_CONFIG": None}


def setup(dsn: str, **options: str) -> Task[..., None]:
    """Configure and set up Django in this process (a child interpreter or a forked worker) and bind
    the task (returned). Hazard: once per process; the supervisor never calls it."""
    import django
    from django.conf import settings

    settings.configure(**settings_for(dsn, **options))
    django.setup()
    return _bind_task()


_WORKER: dict = {}  # the forked worker's context, for the task (set in run_worker, before db_worker)


def harness_job(context: TaskContext, **args: object) -> None:
    """The task: the harness's body, told the attempt the library implies (``TaskContext.attempt``,
    the claims in ``worker_ids``). Bound by :func:`_bind_task` to a ``Task`` of the same name, so the
    ``task_path`` the library stores (``module.harness_job``) resolves to it (``models.py:194-208``)."""
    hosted.run_job(_WORKER["ctx"], args, attempt=context.attempt)


def _bind_task() -> Task[..., None]:
    """``@task(takes_context=True)`` applied once Django is configured: the decorator validates the
    task against the configured backend at once (``django_tasks/base.py:90-91``), so it cannot run at
    import in the unconfigured supervisor. The module's ``harness_job`` becomes the ``Task`` (the name
    the library stores must resolve to it): a rebinding the type checker cannot follow, so through
    ``globals()``."""
    from django_tasks import task
    from django_tasks.base import Task

    bound: object = globals()["harness_job"]
    if not isinstance(bound, Task):
        bound = task(takes_context=True)(harness_job)
        globals()["harness_job"] = bound
    return bound


def child(command: str, parent: int) -> None:
    """A child interpreter's life. ``migrate``: one request (the owner's DSN), then exit. ``serve``: the
    enqueuer -- Django set up once for the DSN of its first request; then per line of stdin the jobs'
    arguments, enqueued in one ``transaction.atomic()``, and one JSON line back (their ids, or the
    error). Each request runs as Django runs a request: ``close_old_connections`` before and after
    (``CONN_MAX_AGE`` 0: a connection of its own each time, so a server restart between runs breaks
    nothing). It leaves at stdin's end, or with its parent (``PR_SET_PDEATHSIG``)."""
    procs.die_with_parent(signal.SIGKILL, parent)
    request = json.loads(sys.stdin.readline())
    job = setup(request["dsn"], application_name=f"pgjc-django-tasks-{command}")
    from django.core.management import call_command
    from django.db import close_old_connections, transaction

    if command == "migrate":
        call_command("migrate", verbosity=0, interactive=False)
        return
    while request is not None:
        close_old_connections()
        answer: dict[str, list[str] | str]
        try:
            with transaction.atomic():
                answer = {"ids": [str(job.enqueue(**args).id) for args in request["jobs"]]}
        except Exception as exc:
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        close_old_connections()
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
        line = sys.stdin.readline()
        request = json.loads(line) if line else None


def _start(command: str, stderr: IO[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(sys.path), command, str(os.getpid())],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)


class Enqueuer:
    """The supervisor's side of ``child("serve")``: one child interpreter per DSN, started at the first
    enqueue and kept for the process's life (Django's setup, about 0.6 s of CPU, paid once, not per run).
    Hazard: the forked workers inherit its pipes; they only hold them (the child sees stdin's end once
    the supervisor and its workers are gone, or dies with the supervisor)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.dsn: str | None = None
        self.stderr: IO[str] | None = None
        self.lock = threading.Lock()
        atexit.register(self.close)  # a forked worker leaves by os._exit: only the supervisor runs it

    def enqueue(self, dsn: str, jobs: list[dict]) -> list[str]:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None or dsn != self.dsn:
                self.close()
                self.stderr = tempfile.TemporaryFile("w+")  # a file, not a pipe nobody drains
                self.proc = _start("serve", self.stderr)
                self.dsn = dsn
            stdin = self.proc.stdin
            stdout = self.proc.stdout
            assert stdin is not None and stdout is not None  # stdin=PIPE, stdout=PIPE (_start)
            stdin.write(json.dumps({"dsn": dsn, "jobs": jobs}) + "\n")
            stdin.flush()
            line = stdout.readline()
            if not line:
                err = self.close()
                raise RuntimeError(f"django-tasks-db enqueuer ended: {err.strip()[-2000:]}")
            answer = json.loads(line)
            if "error" in answer:
                raise RuntimeError(f"django-tasks-db enqueue failed: {answer['error']}")
            return answer["ids"]

    def close(self) -> str:
        """End the child (its stdin's end); what it wrote to stderr."""
        err = ""
        if self.proc is not None:
            assert self.proc.stdin is not None and self.proc.stdout is not None  # stdin=PIPE, stdout=PIPE
            try:
                self.proc.stdin.close()
            except OSError:  # a child already gone: its pipe is broken
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()
            self.proc = None
        if self.stderr is not None:
            self.stderr.seek(0)
            err = self.stderr.read()
            self.stderr.close()
            self.stderr = None
        return err


def _migrate(dsn: str) -> None:
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(sys.path), "migrate", str(os.getpid())],
                       input=json.dumps({"dsn": dsn}) + "\n", capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"django-tasks-db migrate failed (exit {r.returncode}): "
                           f"{r.stderr.strip()[-2000:]}")


class DjangoTasks(DeclaredDesign):
    name = "django-tasks-db"
    library = "django-tasks-db"
    STATUS = {"READY": "queued", "RUNNING": "running", "SUCCESSFUL": "done", "FAILED": "dead"}
    SQL = Q
    TIMING = TIMING
    # One task at a time: db_worker's loop claims a task, runs it, then fetches again (db_worker.py:106-128).
    concurrency = 1

    def __init__(self, **options: str):
        super().__init__(**options)
        self.enqueuer = Enqueuer()

    # --- the runner's side (admin connection) ---------------------------------------------------
    def install(self, conn, *, worker_role: str) -> None:
        _migrate(admin_dsn(conn))
        tables = [table for (table,) in conn.execute(Q.grantable).fetchall()]
        grant(conn, worker_role, "select, insert, update, delete", tables)

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        """Through the task's own ``enqueue`` in the enqueuer's child interpreter (committed there,
        before the runner's transaction records the ids). *max_attempts* sets nothing: no retry."""
        jobs = list(jobs)
        if not jobs:
            return
        ids = self.enqueuer.enqueue(admin_dsn(conn), [hosted.job_args(j) for j in jobs])
        hosted.record_ids(conn, [(j.id, lib) for j, lib in zip(jobs, ids, strict=True)])

    # --- the worker's side (forked worker process) ----------------------------------------------
    def run_worker(self, ctx) -> None:
        if not self.ready(ctx):
            return
        setup(ctx.worker_dsn, application_name=f"{ctx.identity}/queue")
        _WORKER["ctx"] = ctx
        from django.core.management import call_command

        interval = self.intervals(ctx.schedule)["interval"]
        call_command("db_worker", interval=interval, worker_id=ctx.system_id, max_tasks=ctx.schedule.dequeues)
