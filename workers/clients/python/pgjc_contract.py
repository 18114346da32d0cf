"""pg-job-chaos worker contract, version 1: the Python client (psycopg 3 only; any Python >= 3.10).

A queue worker written in any language is judged by pg-job-chaos through a command that speaks
this contract (``docs/contract.md`` is the specification; this module and
``workers/clients/node/pgjc-contract.js`` are its two clients). This file imports nothing of
pg-job-chaos: the harness puts its directory on ``PYTHONPATH`` for another interpreter (oban-py on
Python 3.12), or a user copies it.

The command's subcommands (``argv[1]``), each given ``DATABASE_URL``:

``describe``  print the descriptor: ``{"kind": "descriptor", "contract": 1, "system", "version",
              "sql": {"reset", "pending", "final_states"}, "status": {library state: harness state}}``
``install``   install the queue's schema with its own installer (``DATABASE_URL`` the owner's;
              ``PGJC_WORKER_ROLE`` the ordinary role to grant to); print ``{"kind": "installed"}``
``enqueue``   read ``{"jobs": [args, ...], "max_attempts": n}`` on stdin, queue each job, print
              ``{"kind": "enqueued", "ids": [[job, library id], ...]}``
``work``      run the queue's own worker loop (``DATABASE_URL`` the worker role's; ``PGJC_CONTRACT``
              the spec file) whose task calls :meth:`Client.run_job`; exit 0 when
              :meth:`Client.may_dequeue` says the budget is spent, 1 for an injected crash.

:class:`Client` writes the execution log's records (one ``os.write`` per line, ``O_APPEND``), runs the
harness's job body, and waits at a watched point for the supervisor's go (``SIGUSR1``, taken by
``sigtimedwait``: never a busy loop; from asyncio in a thread, never on the event loop's).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import signal
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import pgjc_tenant
import psycopg
import psycopg.sql
from pgjc_body import EXIT_CRASH, Execution, InjectedError  # noqa: F401 - the client's API

CONTRACT = 1
ENV = "PGJC_CONTRACT"
GO = signal.SIGUSR1
BODY_TEXTS = {"select clock_timestamp()", "begin", "commit", "rollback", ""}  # "": the borrow's check


def digest(text: str) -> str:
    """A statement's strike point: ``sql:`` and the first 8 hex digits of the SHA-1 of its text with
    whitespace runs collapsed (the harness names the same text the same way)."""
    return "sql:" + hashlib.sha1(" ".join(text.split()).encode()).hexdigest()[:8]


def _text(query) -> str | None:
    """A statement's text as the harness digests it: a composed one's SQL parts, literals as ``?``."""
    if isinstance(query, str | bytes):
        return query.decode() if isinstance(query, bytes) else query
    if isinstance(query, psycopg.sql.SQL):
        return query._obj  # noqa: SLF001 - its template
    if isinstance(query, psycopg.sql.Composed):
        return " ".join(_text(part) or "?" for part in query._obj)  # noqa: SLF001
    return None


def alive(conn: psycopg.Connection) -> bool:
    """Whether an idle body connection still answers: an empty statement in autocommit, as
    psycopg_pool's ``ConnectionPool.check_connection`` sends (this client needs no psycopg_pool)."""
    if conn.closed or conn.broken:
        return False
    autocommit = conn.autocommit
    try:
        conn.autocommit = True
        conn.execute("")
        conn.autocommit = autocommit
    except psycopg.Error:
        return False
    return True


def emit(record: dict) -> None:
    """One JSON line on stdout: a subcommand's answer."""
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class Client:
    """The worker's side of the contract, built from the spec file ``PGJC_CONTRACT`` names."""

    def __init__(self, path: str | None = None):
        path = path or os.environ.get(ENV)
        if not path:
            raise SystemExit(f"pgjc_contract: {ENV} is not set (run by pg-job-chaos's contract design)")
        with open(path) as f:
            self.spec = spec = json.load(f)
        if spec.get("contract") != CONTRACT:
            raise SystemExit(f"pgjc_contract: contract {spec.get('contract')!r}; "
                             f"this client speaks {CONTRACT}")
        self.identity = spec["identity"]
        self.dsn = spec["dsn"]
        self.seconds = spec["seconds"]  # lease, poll, heartbeat, max_runtime: real seconds
        self.intervals = spec.get("intervals", {})
        self.options = spec.get("options", {})
        self.watch = {(w[0], w[1]) for w in spec["watch"]}
        self.started = 0
        self._fd = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._body: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()  # the job bodies' connections
        self._free: list[psycopg.Connection] = []
        self._lock_free = threading.Lock()
        # pool_size: the harness sizes it to what the queue runs at once, retries that overlap a live
        # execution included (workers/design.py DesignHandle.pool_size): no body waits on this pool.
        self._slots = threading.BoundedSemaphore(spec.get("pool_size") or 1)
        # Hazard: asyncio.to_thread's executor has min(32, cores + 4) threads (6 on 2 cores): the
        # bodies get as many threads as the pool, or the threads, not the queue, would bound them.
        self._threads = ThreadPoolExecutor(max_workers=(spec.get("pool_size") or 1) + 4,
                                           thread_name_prefix="pgjc-body")
        self._seen: set[tuple[str, bool]] = set()
        # The go is taken only by sigtimedwait: blocked in every thread (threads inherit the mask).
        signal.pthread_sigmask(signal.SIG_BLOCK, {GO})
        # A deploy's SIGTERM (forwarded by the forked worker): take no more jobs; the adapter's own stop
        # follows once may_dequeue says so. Hazard: a handler runs between bytecodes: it only sets a flag.
        self.terminating = False
        signal.signal(signal.SIGTERM, self._terminated)
        self.log("client-start", runtime=f"python {sys.version.split()[0]}", contract=CONTRACT)

    # --- the log and the points ------------------------------------------------------------------
    def log(self, event: str, **fields) -> None:
        rec = {"t": time.monotonic(), "wall": time.time(), "worker": self.identity, "pid": os.getpid(),
               "event": event, **fields}
        os.write(self._fd, (json.dumps(rec, default=str) + "\n").encode())

    def wait(self, job: int | None, attempt: int | None, point: str, backend: int | None) -> None:
        """At a watched point: say so, and wait for the go (at most ``strike_wait`` seconds)."""
        with self._lock:  # one waiter at a time: the go is process-wide
            self.log("point", job=job, attempt=attempt, point=point, backend=backend)
            if signal.sigtimedwait([GO], self.spec["strike_wait"]) is None:
                self.log("point-timeout", job=job, attempt=attempt, point=point)

    def _terminated(self, signum: int, frame: object) -> None:
        self.terminating = True

    def may_dequeue(self) -> bool:
        """Whether the worker may take another job: not after a deploy's SIGTERM, nor past the schedule's
        dequeue budget."""
        if self.terminating:
            return False
        return self.spec["dequeues"] is None or self.started < self.spec["dequeues"]

    def watch_statements(self) -> None:
        """Make every statement this process sends through psycopg (the queue's own) a strike point:
        the wrap of ``workers/body/statements.py``, again here (this client imports nothing of pg-job-chaos);
        and track the tenant setting on every connection (``pgjc_tenant``), logging each statement the
        job's own code sends (``run_job(..., work=)``; not the body's) with the setting it ran under."""
        client = self
        setting = self.spec.get("tenant_setting", "app.tenant").lower()

        def track(cur, query, params, many):
            text = _text(query)
            if text is None or not pgjc_tenant.mentions(text, setting):
                return None
            full = text if isinstance(query, str) else pgjc_tenant.text_of(query, cur.connection)
            rows = (params if isinstance(params, list | tuple) else [None]) if many else (params,)
            return [c for p in rows for c in pgjc_tenant.changes(full or "", setting, p)] or None

        def before(cur, query, params=None, many=False):
            found = track(cur, query, params, many)
            text = _text(query)
            if text is None or cur.connection in client._body or " ".join(text.split()).lower() in BODY_TEXTS:
                return None, found
            point = digest(text)
            job = getattr(client._local, "job", None)
            if job is not None and not found:
                client.log_statement(cur, job, text)
            key = (point, job is not None)
            if key not in client._seen:
                client._seen.add(key)
                client.log("statement", point=point, job=job, bound=job is not None)
            return ((job, point) if (job, point) in client.watch else None), found

        def after(cur, found):
            if found:
                pgjc_tenant.applied(cur.connection, found)
            else:
                pgjc_tenant.settle(cur.connection)

        def hold(cur, hit):
            client.wait(hit[0], getattr(client._local, "attempt", None), hit[1],
                        cur.connection.info.backend_pid)

        def params_of(a, k, many):
            return a[0] if a else k.get("params_seq" if many else "params")

        def sync(method, many):
            @functools.wraps(method)
            def execute(self, query, *a, **k):
                hit, found = before(self, query, params_of(a, k, many), many)
                if hit:
                    hold(self, hit)
                result = method(self, query, *a, **k)
                after(self, found)
                return result
            return execute

        def asynchronous(method, many):
            @functools.wraps(method)
            async def execute(self, query, *a, **k):
                hit, found = before(self, query, params_of(a, k, many), many)
                if hit:
                    await asyncio.to_thread(hold, self, hit)  # never on the event loop's thread
                result = await method(self, query, *a, **k)
                after(self, found)
                return result
            return execute

        def command(method):  # the connection's own BEGIN, COMMIT, ROLLBACK, savepoints
            @functools.wraps(method)
            def _exec_command(self, cmd, *a, **k):
                result = yield from method(self, cmd, *a, **k)
                pgjc_tenant.command(self, cmd)
                return result
            return _exec_command

        for cls, wrap in ((psycopg.Cursor, sync), (psycopg.AsyncCursor, asynchronous)):
            for name in ("execute", "executemany"):
                setattr(cls, name, wrap(getattr(cls, name), name == "executemany"))
        base = psycopg.Connection.__mro__[1]  # psycopg's private generator (3.1 to 3.3)
        if hasattr(base, "_exec_command"):
            base._exec_command = command(base._exec_command)

    def log_statement(self, cur, job: int, text: str) -> None:
        """One ``tenant-statement`` record per execution, statement and setting in force."""
        local = self._local
        attempt = getattr(self._local, "attempt", None)
        if getattr(local, "logged_for", None) != (job, attempt):
            local.logged = set()
            local.logged_for = (job, attempt)
        value = pgjc_tenant.in_force(cur.connection)
        if (text, value) in local.logged:
            return
        local.logged.add((text, value))
        self.log("tenant-statement", job=job, attempt=attempt, statement=" ".join(text.split())[:120],
                 value=value, known=value is not pgjc_tenant.UNKNOWN)

    # --- the job body ------------------------------------------------------------------------------
    def run_job(self, args: dict, attempt: int, work=None) -> None:
        """The harness's job body for one execution of the job *args* names (the task's arguments as
        enqueued), *attempt* as the queue counts it (1-based). Raises what the body raised, so the
        queue records the failure and applies its own retry policy. Safe from several threads.
        *work* (a callable of no arguments): the job's own code, called inside the execution after its
        first read; its statements are the job's, each logged with the tenant setting it ran under."""
        Execution(self, args, int(attempt), work).run()

    async def run_job_async(self, args: dict, attempt: int, work=None) -> None:
        await asyncio.get_running_loop().run_in_executor(self._threads, self.run_job, args, attempt, work)

    def connect(self) -> psycopg.Connection:
        tenant = self.spec["tenant"]
        conn = psycopg.connect(self.dsn, autocommit=tenant["autocommit"], application_name=self.identity)
        self._body.add(conn)
        self.log("connect", backend=conn.info.backend_pid)
        return conn

    def borrow(self) -> psycopg.Connection:
        """A body connection from the client's own pool of ``pool_size`` (the harness's pool, as a
        hosted body borrows from it): a job waits for one when as many run at once; each is kept for
        the next job, whatever thread runs it (a library's executor threads come and go). A kept
        connection is checked before it is lent (:func:`alive`), as a production pool does: one a
        server restart or a promotion cut while it was idle is closed and replaced, never handed to a
        job (whose first statement would fail and burn the queue's attempt)."""
        self._slots.acquire()
        while True:
            with self._lock_free:
                conn = self._free.pop() if self._free else None
            if conn is None:
                break
            if alive(conn):  # outside the lock: a round trip
                return conn
            conn.close()
        try:
            return self.connect()
        except BaseException:
            self._slots.release()
            raise

    def release(self, conn: psycopg.Connection) -> None:
        if not conn.closed and not conn.broken:
            with self._lock_free:
                self._free.append(conn)
        self._slots.release()

    def started_count(self, job: int) -> int:
        """Executions of *job* that logged ``started`` in the run, every worker's log read: a copy of
        ``core/execlog.started_count`` (this client runs where pg-job-chaos is not installed)."""
        n = 0
        run_dir = self.spec["run_dir"]
        for name in os.listdir(run_dir):
            if name.endswith(".events.jsonl"):
                with open(os.path.join(run_dir, name), "rb") as f:
                    for line in f.read().splitlines():
                        if b'"started"' in line:
                            try:
                                r = json.loads(line)
                            except ValueError:
                                continue
                            n += r.get("event") == "started" and r.get("job") == job
        return n


def load_sql(path: str) -> dict[str, str]:
    """The statements of a ``.sql`` file, each after a ``-- name: NAME`` line (comments dropped)."""
    out: dict[str, list[str]] = {}
    name = None
    with open(path) as f:
        for line in f:
            if line.startswith("-- name:"):
                name = line.split(":", 1)[1].strip()
                out[name] = []
            elif name is not None and not line.lstrip().startswith("--"):
                out[name].append(line)
    return {k: "".join(v).strip().removesuffix(";") for k, v in out.items()}


def main(commands: dict) -> None:
    """Dispatch ``argv[1]`` to ``commands[name]()`` and exit with what it returns (None: 0). An
    unknown subcommand exits 2 and names the known ones."""
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in commands:
        sys.stderr.write(f"usage: {sys.argv[0]} {{{'|'.join(commands)}}}\n")
        raise SystemExit(2)
    raise SystemExit(commands[name]() or 0)
