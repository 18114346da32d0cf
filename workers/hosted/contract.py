"""A worker in any runtime, through a subprocess that speaks the worker contract
(``docs/reference/contract.md``).

:class:`ContractDesign` is a hosted design (``workers/hosted/protocol.py``) whose library lives in another
process: a command (``--design-option command="node worker.js"``; a subclass fixes :attr:`COMMAND`)
with the subcommands ``describe``, ``install``, ``enqueue`` and ``work``. The harness keeps what it
judges on its own side: the queue's state is read by the SQL the descriptor gives (``reset``,
``pending``, ``final_states``: run by the supervisor, never by a subprocess per poll), and the
client writes the execution log's own records, so properties, strategies, shrinking and the report
are the same for every runtime.

In the forked worker, :meth:`ContractDesign.run_worker` starts ``command work`` in the worker's
process group (a kill or pause of the worker reaches it; the supervisor's go at a point goes to the
pid in the ``point`` record, one of the group's: ``WorkerProcess.go``), asks the kernel to kill it
with the worker, unblocks the go signal for it (Node cannot unblock a signal it inherits blocked),
and watches it: a client that dies writes no end of its own, so ``process-exit`` ends its execution
(:func:`workers.hosted.spawned.watch`). The worker exits with the client's code: 1 an injected crash,
anything else but 0 a worker error; a client that exits 0 returns, and the worker's exit is ``budget`` when
the ``started`` records in its log reach the dequeue budget, else ``stopped-by-itself``
(``WorkerContext.budget_spent``).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import quote

from psycopg import conninfo

from ...core import procs
from ...core.errors import UsageError
from ...faults.catalogue import CATALOGUE
from ..body.execution import STRIKE_SIGNAL
from ..body.execution import Q as BODY
from . import declared, spawned
from . import protocol as hosted

CONTRACT = 1
ENV = "PGJC_CONTRACT"
CLIENTS = Path(__file__).parent.parent / "clients"  # python/pgjc_contract.py, node/pgjc-contract.js
SUBCOMMAND_TIMEOUT = 120.0  # seconds for describe, install or enqueue (an npm package's first import is slow)
MODES = ("local", "session", "session-autocommit", "reset")  # what a client's own connections can do


class ContractError(RuntimeError):
    """The client broke the contract (a subcommand failed or answered out of shape)."""


class ContractDesign(hosted.HostedDesign):
    """A queue in another runtime, through the contract's command."""

    name = "contract"
    COMMAND: tuple[str, ...] = ()  # a subclass's fixed command; else the ``command`` option
    SCRIPT: Path | None = None  # or a subclass's client script, run by RUNTIME (found on PATH)
    RUNTIME = "node"
    OPTIONS = {"command": "the client command, shell words (e.g. node examples/contract/worker.js)"}
    pool_first = False  # the client opens its own connections

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if (cls.COMMAND or cls.SCRIPT is not None) and "OPTIONS" not in vars(cls):
            cls.OPTIONS = {}  # a client of its own: no command option

    def __init__(self, **options: str):
        super().__init__(**options)
        command = tuple(shlex.split(options["command"])) if options.get("command") else self.client()
        if not command:
            raise UsageError(f"design {self.name}: give the client command: --design-option command='...'")
        self.command = command
        self._descriptor: dict | None = None
        try:  # the client's own name for its queue names the design in every verdict
            self.name = self.descriptor["system"]
        except ContractError as exc:
            raise UsageError(f"design {self.name}: the client does not describe itself: {exc}") from None

    def client(self) -> tuple[str, ...]:
        """The client command without a ``command`` option: :attr:`COMMAND`, else :attr:`RUNTIME`
        running :attr:`SCRIPT` (empty without either)."""
        if self.COMMAND or self.SCRIPT is None:
            return self.COMMAND
        return (shutil.which(self.RUNTIME) or self.RUNTIME, str(self.SCRIPT))

    # --- the subcommands ---------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        """The clients' environment: the Python client importable, the Node client's packages found."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CLIENTS / "python"), env.get("PYTHONPATH")) if p)
        # PGJC_NODE_MODULES: another version's packages (harness/corpus/envs.py), found before the pinned ones
        node = (env.get("PGJC_NODE_MODULES"), str(CLIENTS / "node"), str(CLIENTS / "node" / "node_modules"),
                env.get("NODE_PATH"))
        env["NODE_PATH"] = os.pathsep.join(p for p in node if p)
        return env

    def call(self, sub: str, *, dsn: str, stdin: dict | None = None,
             env: dict[str, str] | None = None) -> dict:
        """Run ``command sub`` and return its last JSON line (stdout is answers, stderr logs)."""
        full = {**self.environment(), "DATABASE_URL": url(dsn), **(env or {})}
        said = f"{shlex.join(self.command)} {sub}"
        try:
            p = subprocess.run([*self.command, sub], input=json.dumps(stdin) if stdin is not None else "",
                               capture_output=True, text=True, env=full, timeout=SUBCOMMAND_TIMEOUT,
                               check=False)
        except FileNotFoundError as exc:
            raise UsageError(f"design {self.name}: cannot run {self.command[0]!r}: {exc.strerror}") from None
        except subprocess.TimeoutExpired:
            raise ContractError(f"{said}: no answer in {SUBCOMMAND_TIMEOUT:g} s") from None
        if p.returncode != 0:
            tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
            raise ContractError(f"{said} exited {p.returncode}: " + " | ".join(tail))
        lines = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("{")]
        if not lines:
            raise ContractError(f"{said}: no JSON line on stdout")
        try:
            return json.loads(lines[-1])
        except ValueError as exc:
            raise ContractError(f"{said}: its answer is not JSON ({exc})") from None

    @property
    def descriptor(self) -> dict:
        """The client's ``describe`` answer, asked once (the admin DSN is not needed for it)."""
        if self._descriptor is None:
            d = self.call("describe", dsn="")
            missing = [k for k in ("kind", "contract", "system", "sql", "status") if k not in d]
            sql = d.get("sql", {})
            missing += [f"sql.{k}" for k in ("reset", "pending", "final_states") if k not in sql]
            said = shlex.join(self.command)
            if missing or d.get("kind") != "descriptor":
                raise ContractError(f"{said} describe: not a descriptor (missing {', '.join(missing)})")
            if d["contract"] != CONTRACT:
                raise ContractError(f"{said} speaks contract {d['contract']}; this harness {CONTRACT}")
            self._descriptor = d
        return self._descriptor

    def versions(self) -> dict[str, str]:
        d = self.descriptor
        return {d["system"]: str(d.get("version", "unknown"))}

    # --- protocol v2 ---------------------------------------------------------------------------------
    def for_run(self, schedule):
        run = super().for_run(schedule)
        if schedule.tenant_mode not in MODES:
            raise UsageError(f"design {self.name}: tenant mode {schedule.tenant_mode!r} is not one a "
                             f"contract client keeps; modes: {', '.join(MODES)}")
        if schedule.pooler is not None:
            raise UsageError(f"design {self.name}: behind a pooler the client cannot report server sessions "
                             "(not yet)")
        return run

    def install(self, conn, *, worker_role: str) -> None:
        self.call("install", dsn=declared.admin_dsn(conn), env={"PGJC_WORKER_ROLE": worker_role})

    def reset(self, conn) -> None:
        conn.execute(self.descriptor["sql"]["reset"])

    def enqueue(self, conn, jobs, *, max_attempts: int) -> None:
        request = {"jobs": [hosted.job_args(j) for j in jobs], "max_attempts": max_attempts,
                   "seconds": {"lease": self.lease}, "intervals": self.intervals(self.schedule),
                   "options": {k: v for k, v in self.options.items() if k != "command"}}
        answer = self.call("enqueue", dsn=declared.admin_dsn(conn), stdin=request)
        ids = answer.get("ids")
        if answer.get("kind") != "enqueued" or not isinstance(ids, list) or len(ids) != len(jobs):
            raise ContractError(f"{shlex.join(self.command)} enqueue: expected ids for {len(jobs)} jobs, "
                                f"got {answer!r}")
        hosted.record_ids(conn, [(int(job), lib) for job, lib in ids])

    def pending(self, conn) -> int:
        return int(conn.execute(self.descriptor["sql"]["pending"]).fetchone()[0])

    def final_states(self, conn) -> list[dict]:
        rows = self._by_job(conn, self.descriptor["sql"]["final_states"], declared.FINAL[2:])
        return declared.final_states(rows, self.descriptor["status"], self.schedule)

    def accepted_finishes(self, conn) -> dict[int, dict] | None:
        """What the queue accepted, by the descriptor's optional ``sql.accepted_finishes``: rows of
        ``(queue id as text, outcome, its name for it, at timestamptz or null, attempt or null, one
        line of what it recorded)``, a finish a row (a job with no finish: one row, outcome null).
        None without that SQL: ``library-one-finish`` then says unknown. The descriptor's
        ``finish_history`` ``"last"`` says the queue keeps its last finish of a job only."""
        query = self.descriptor["sql"].get("accepted_finishes")
        if not query:
            return None
        complete = self.descriptor.get("finish_history", "all") != "last"
        return declared.accepted(self._by_job(conn, query, declared.FINISH[1:]), complete=complete)

    @staticmethod
    def _by_job(conn, query: str, columns: tuple[str, ...]) -> list[dict]:
        """The rows of the client's *query* -- the queue's id, then *columns* in order -- as mappings
        with the schedule's job id as ``id``; a row of no schedule job is left out."""
        ids = hosted.schedule_ids(conn)
        out = []
        for lib, *rest in conn.execute(query):
            if str(lib) in ids:
                out.append({"id": ids[str(lib)], **dict(zip(columns, rest, strict=True))})
        return out

    def run_worker(self, ctx) -> None:
        spec_path = Path(ctx.spec.run_dir) / f"{ctx.identity}.contract.json"
        spec_path.write_text(json.dumps(self.spec_for(ctx)))
        env = {**self.environment(), "DATABASE_URL": url(ctx.worker_dsn), ENV: str(spec_path)}
        parent = os.getpid()

        def child() -> None:  # after fork, before exec: die with the worker; the go not blocked
            # Hazard: no import and no lock here (a forked child of a threaded process); the watch
            # thread starts only after the fork.
            procs.die_with_parent(signal.SIGKILL, parent)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {STRIKE_SIGNAL})

        proc = subprocess.Popen([*self.command, "work"], env=env, stdin=subprocess.DEVNULL, preexec_fn=child)
        ctx.log.write("contract-client", client=proc.pid, command=shlex.join(self.command))
        # a deploy's SIGTERM reaches the client, as a container's signal reaches the queue's own process:
        # its own handler (graphile-worker's), else the contract's (its mayDequeue is false from then on)
        ctx.when_terminated(functools.partial(_forward, proc.pid, signal.SIGTERM))
        stop = threading.Event()
        # a client that dies mid-job: process-exit ends its execution
        spawned.watch(ctx, stop, library=proc.pid)
        code = proc.wait()
        stop.set()
        if code != 0:
            sys.stderr.flush()
            os._exit(code if code > 0 else 128 - code)  # the client's death is the worker's

    def spec_for(self, ctx) -> dict:
        """What ``work`` reads from ``PGJC_CONTRACT`` (the contract's spec file:
        docs/reference/contract.md)."""
        s = ctx.schedule
        mode = ctx.mode
        return {
            "contract": CONTRACT, "identity": ctx.identity, "run_dir": str(ctx.spec.run_dir),
            "log": str(ctx.log.path), "dsn": url(ctx.worker_dsn),
            "watch": watch_list(ctx.spec.watch),
            "strike_wait": ctx.strike_wait, "time_scale": s.time_scale,
            "seconds": {"lease": ctx.lease, "poll": ctx.poll, "heartbeat": ctx.heartbeat,
                        "max_runtime": ctx.max_runtime},
            "intervals": self.intervals(s),
            "options": {k: v for k, v in self.options.items() if k != "command"},
            "tenant": {"mode": s.tenant_mode, "local": mode.local, "autocommit": mode.autocommit,
                       "reset": "RESET app.tenant" if mode.reset is not None else None,
                       "setting": self.tenant_setting},
            "dequeues": s.dequeues, "max_attempts": s.max_attempts, "points": list(self.points),
            "pool_size": s.pool_size,
            "sql": {name: getattr(BODY, name)
                    for name in ("inherited_tenant", "set_tenant", "insert_finished_run", "read_invoices")},
            # a strike by the fault's name: the clients know raise, sql-error, crash and hang
            "faults": {f.name: {"point": f.point, "strike": f.name if f.strike else None,
                                "work_lease_factor": f.work_lease_factor}
                       for f in CATALOGUE.values() if f.kind == "job"},
        }


def watch_list(watch) -> list[list]:
    """The watched ``(job, point)`` pairs as the spec's ``watch`` list, in a stable order. A statement
    point of no job (``job`` None: a maintenance statement, a first claim) sorts first: ``None < int``
    is a TypeError, which failed every contract worker at start (a deploy search on oban met it)."""
    ordered = sorted(watch, key=lambda jp: (jp[0] is not None, jp[0] or 0, jp[1]))
    return [[job, point] for job, point in ordered]


def url(dsn: str) -> str:
    """*dsn* (key=value or a URL) as a ``postgresql://`` URL, which every runtime's driver reads (the
    field's contract names it ``DATABASE_URL``); the other keywords become query parameters."""
    if dsn.startswith(("postgres://", "postgresql://")) or not dsn:
        return dsn
    params = conninfo.conninfo_to_dict(dsn)
    user = params.pop("user", "")
    password = params.pop("password", None)
    host = params.pop("host", "")
    port = params.pop("port", "")
    dbname = params.pop("dbname", "")
    auth = quote(str(user), safe="") + (":" + quote(str(password), safe="") if password else "")
    # a multi-host DSN (the replicated back end's) as libpq's URL writes it: host:port,host:port
    hosts = str(host).split(",")
    ports = str(port).split(",") if port else []
    where = ",".join(quote(h, safe="") + (f":{ports[min(i, len(ports) - 1)]}" if ports else "")
                     for i, h in enumerate(hosts))
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items())
    at = f"{auth}@" if auth else ""
    return f"postgresql://{at}{where}/{quote(str(dbname), safe='')}" + (f"?{query}" if query else "")


def _forward(pid: int, sig: int) -> None:
    """Send *sig* to the client (called from the worker's SIGTERM handler: no lock, no log)."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
