"""A pooler ``pgbouncer[:transaction|session[:N]]`` (``ServerSpec.pooler``): PgBouncer between the workers
and the server.

The harness starts its own PgBouncer (Debian's ``pgbouncer`` package, 1.18 here) on a free
127.0.0.1 port, for the run's database and worker role only; the supervisor, the sampler and the
admin connection keep talking to the server directly. It runs like the server: as the
unprivileged user when we are root (PgBouncer refuses to run as root), in a run directory of its
own under :data:`harness.postgres.local.RUNS_DIR` (an ``owner`` file, so the next start sweeps it
if we die), tied to our death (``PR_SET_PDEATHSIG`` = SIGTERM, its immediate shutdown), and
registered with the janitor (``kill`` by pid and start time, then ``rmtree``).

Defaults are PgBouncer's own, as a production install has them, except where noted in
:func:`config`. Hazards it exists to show (README, *Through PgBouncer*):

* transaction mode hands a server connection to whichever client asks next: a session-level
  ``set_config('app.tenant', .., false)`` reaches *another worker*;
* psycopg prepares a statement after ``prepare_threshold`` (5) executions; behind transaction
  mode the next transaction may run on a server connection where ``_pg3_0`` does not exist, or
  where another client already prepared it. ``prepare_threshold=None`` avoids it (1.18 has no
  ``max_prepared_statements``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import conninfo

from ...core.errors import HarnessError, UsageError
from ...core.procs import die_with_parent, process_start_time
from . import local

MODES = ("transaction", "session")
POOL_SIZE = 5  # default server connections per (database, user): as many as the workers' clients use at once
# Hazard: with enough server sessions, PgBouncer's LIFO reuse (server_round_robin = 0) gives each busy
# client back the session it just released, so sessions stay with one worker; a pool smaller than the
# clients (":1") hands them from worker to worker, as a pooler deployed to save connections does.
READY_TIMEOUT = 30.0  # seconds for PgBouncer to accept a connection that reaches the server
STOP_GRACE = 5.0  # seconds between SIGTERM (immediate shutdown) and SIGKILL
INSTALL = "apt-get install -y pgbouncer"
# PgBouncer's own default, stated: after a failed connection to the server (a restart), it waits this
# long before the next try, and its clients wait with it -- a worker behind it after a restart does.
SERVER_LOGIN_RETRY = 15


def parse(spec: str | None) -> str | None:
    """``pgbouncer[:transaction|session[:N]]`` -> the canonical spec (``pgbouncer:MODE`` or
    ``pgbouncer:MODE:N``, N server connections); None or ``none`` -> None; anything else is a
    :class:`UsageError`."""
    if spec in (None, "", "none"):
        return None
    name, _, rest = spec.partition(":")
    mode, _, size = rest.partition(":")
    if name != "pgbouncer" or (mode and mode not in MODES) \
            or (size and not (size.isdigit() and int(size) >= 1)):
        raise UsageError(f"the pooler (pooler) {spec!r}: expected pgbouncer[:transaction|session[:N]] "
                         "(default transaction, N server connections, default 5)")
    return f"pgbouncer:{mode or 'transaction'}" + (f":{int(size)}" if size else "")


def _mode_and_size(spec: str) -> tuple[str, int]:
    _, mode, *size = spec.split(":")
    return mode, int(size[0]) if size else POOL_SIZE


def find() -> str:
    """The ``pgbouncer`` binary ($PGBOUNCER, then PATH, then /usr/sbin), or :class:`HarnessError`."""
    for candidate in (os.environ.get("PGBOUNCER"), shutil.which("pgbouncer"), "/usr/sbin/pgbouncer"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise HarnessError(f"PgBouncer is not installed: {INSTALL}")


def _version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    first = (out.stdout or "").strip().splitlines()[:1]
    return first[0].split()[-1] if first else "unknown"


def config(*, listen_port: int, server_host: str, server_port: int, database: str, mode: str,
           run_dir: Path, pool_size: int = POOL_SIZE) -> str:
    """The pgbouncer.ini for one run: one database, one auth file, nothing else reachable."""
    return "\n".join([
        "[databases]",
        f"{database} = host={server_host} port={server_port} dbname={database}",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {listen_port}",
        "unix_socket_dir =",  # no socket file outside our directory
        "auth_type = scram-sha-256",
        f"auth_file = {run_dir / 'users.txt'}",
        f"pool_mode = {mode}",
        f"default_pool_size = {pool_size}",
        f"server_login_retry = {SERVER_LOGIN_RETRY}",
        "max_client_conn = 500",
        # psycopg sends none of these, but a user's libpq may: accepting them changes nothing here
        "ignore_startup_parameters = extra_float_digits,options",
        f"logfile = {run_dir / 'pgbouncer.log'}",
        "",
    ])


@dataclass
class Bouncer:
    """A running PgBouncer; :meth:`stop` is idempotent."""

    proc: subprocess.Popen
    run_dir: Path
    port: int
    mode: str
    version: str
    pool_size: int = POOL_SIZE
    janitor_keys: tuple[str, ...] = ()

    def dsn(self, worker_dsn: str) -> str:
        """*worker_dsn* (the direct one) pointed at PgBouncer instead."""
        return conninfo.make_conninfo(worker_dsn, host="127.0.0.1", port=str(self.port))

    def describe(self) -> str:
        return (f"PgBouncer {self.version} ({self.mode} mode, {self.pool_size} server connections) "
                f"on 127.0.0.1:{self.port}")

    def stop(self, janitor=None) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if janitor is not None:
            for k in self.janitor_keys:
                janitor.forget(k)


def start(spec: str, *, server_dsn: str, worker_dsn: str, janitor=None) -> Bouncer:
    """Start PgBouncer in front of the server *server_dsn* names, for *worker_dsn*'s database and
    role. Raises :class:`HarnessError` when it is not installed or does not start."""
    mode, size = _mode_and_size(spec)
    binary = find()
    server = conninfo.conninfo_to_dict(server_dsn)
    worker = conninfo.conninfo_to_dict(worker_dsn)
    user = local.run_as_user()
    local.RUNS_DIR.mkdir(parents=True, exist_ok=True)
    os.chmod(local.RUNS_DIR, 0o1777)
    run_dir = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-pgbouncer-", dir=local.RUNS_DIR))
    keys = [janitor.register("rmtree", path=str(run_dir))] if janitor is not None else []
    try:
        (run_dir / "owner").write_text(f"{os.getpid()} {process_start_time(os.getpid())}\n")
        users = run_dir / "users.txt"
        users.write_text(f'"{worker["user"]}" "{worker["password"]}"\n')
        for p in (run_dir, users):
            local.chown(p, user)
        os.chmod(users, 0o600)
        return _start(binary, (mode, size), run_dir, server, worker, user, janitor, keys, worker_dsn)
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        if janitor is not None:
            for k in keys:
                janitor.forget(k)
        raise


def _start(binary, mode_size: tuple[str, int], run_dir: Path, server: dict, worker: dict, user, janitor, keys,
           worker_dsn) -> Bouncer:
    mode, size = mode_size
    ini = run_dir / "pgbouncer.ini"
    logfile = run_dir / "pgbouncer.log"
    for attempt in range(3):  # a free port can be taken between our check and the bind
        port = local.free_port()
        ini.write_text(config(listen_port=port, server_host=server.get("host", "127.0.0.1"),
                              server_port=int(server.get("port", 5432)), database=worker["dbname"], mode=mode,
                              run_dir=run_dir, pool_size=size))
        proc = subprocess.Popen([binary, str(ini)], user=user, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_tie(os.getpid()), cwd=run_dir)
        bouncer = Bouncer(proc, run_dir, port, mode, _version(binary), size)
        if janitor is not None:
            bouncer.janitor_keys = (
                janitor.register("kill", pid=proc.pid, start=process_start_time(proc.pid)), *keys)
        try:
            _wait_ready(bouncer, bouncer.dsn(worker_dsn), logfile)
            return bouncer
        except HarnessError:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if janitor is not None:
                janitor.forget(bouncer.janitor_keys[0])
            text = logfile.read_text(errors="replace") if logfile.exists() else ""
            if attempt == 2 or "Address already in use" not in text:
                raise
    raise AssertionError("unreachable")


def _tie(parent: int):
    def preexec() -> None:  # after setuid, in the child: async-signal-simple
        if not die_with_parent(signal.SIGTERM, parent):  # SIGTERM: PgBouncer's immediate shutdown
            os._exit(1)

    return preexec


def _wait_ready(bouncer: Bouncer, dsn: str, logfile: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    last: Exception | None = None
    while time.monotonic() < deadline:
        if bouncer.proc.poll() is not None:
            tail = logfile.read_text(errors="replace").strip().splitlines()[-2:] if logfile.exists() else []
            raise HarnessError(f"PgBouncer exited with code {bouncer.proc.returncode} at start: "
                               f"{' | '.join(tail) or '(no log)'}")
        try:
            psycopg.connect(dsn, connect_timeout=2).close()
            return
        except psycopg.OperationalError as exc:
            last = exc
            time.sleep(0.05)
    raise HarnessError(f"PgBouncer did not accept connections within {READY_TIMEOUT:.0f} s: {last}")
