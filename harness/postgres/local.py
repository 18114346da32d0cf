"""The default back end: a throwaway PostgreSQL that the harness starts and stops itself.

As root (CI and these machines), ``initdb`` and ``postgres`` refuse to run, so the server runs
as an unprivileged user (``postgres`` if it exists, else ``nobody``) with its data directory
owned by that user. Nothing is left behind:

* the server is a direct child tied to our death (``PR_SET_PDEATHSIG`` = SIGINT, a fast shutdown);
* the janitor (``pg_job_chaos.harness.janitor``) removes the run directory if we are killed;
* :func:`sweep` at the next start removes any run directory whose owner is dead;
* and PostgreSQL itself shuts down within about a minute once its ``postmaster.pid`` is gone.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from ...core.errors import HarnessError
from ...core.procs import die_with_parent, process_start_time, stop_server
from ...core.server import Janitor
from . import binaries

RUNS_DIR = Path(tempfile.gettempdir()) / "pg-job-chaos"
READY_TIMEOUT = 60.0  # seconds for a fresh server to accept connections
ADMIN = "pgjc_admin"

# Room for every slot's workers at once, each with its library's own pool and the body's (opened as
# needed up to DesignHandle.pool_size: a hosted library runs at its own concurrency): awa's client keeps
# up to 10 connections (AsyncClient max_connections), its bodies up to 12 at once in a searched schedule
# (MAX_JOBS), 3 workers, MAX_SLOTS 8 slots: 8 x 3 x 22 + the supervisors' own ~ 550. Measured: a search
# --design awa --workers 2 --faults crash,overrun,pause, the default 4 slots here, peaked at 90 client
# backends (200 before was the whole limit). 600 costs 20 MB of shared memory over 200 (PostgreSQL 17).
MAX_CONNECTIONS = 600

# Settings for a throwaway server. Durability is irrelevant; the article ran "default settings",
# so nothing here changes the planner, VACUUM or locking behaviour.
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": str(MAX_CONNECTIONS),
    "log_min_messages": "warning",
}
# Runs with the restart fault: an immediate stop must not lose acknowledged commits, or the
# harness's own settings, not the design, would lose a committed claim.
DURABLE_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
CRASH_TIMEOUT = 30.0  # seconds an immediate stop may take before the fast/immediate fallback


def run_as_user() -> str | None:
    """The unprivileged user the server runs as when we are root; None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise HarnessError("running as root, and neither a 'postgres' nor a 'nobody' user exists "
                       "to run PostgreSQL")


def _owner_alive(run_dir: Path) -> bool:
    try:
        pid_s, start = (run_dir / "owner").read_text().split()
    except (OSError, ValueError):
        # No owner file yet: a run that is just starting. Leave it unless it is old.
        try:
            return time.time() - run_dir.stat().st_mtime < 300
        except OSError:
            return False
    return process_start_time(int(pid_s)) == start


def sweep() -> list[str]:
    """Stop servers and remove run directories left by dead harness processes. Returns what it removed."""
    removed: list[str] = []
    if not RUNS_DIR.is_dir():
        return removed
    for run_dir in RUNS_DIR.glob("run-*"):
        if _owner_alive(run_dir):
            continue
        for pidfile in (run_dir / "data" / "postmaster.pid", run_dir / "standby" / "data" / "postmaster.pid"):
            try:  # the standby's: the replicated back end's second node (harness/postgres/replica.py)
                pid = int(pidfile.read_text().splitlines()[0])
                stop_server(pid, grace=10.0)
            except (OSError, ValueError, IndexError):
                pass
        shutil.rmtree(run_dir, ignore_errors=True)
        removed.append(str(run_dir))
    return removed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tie_to_parent(parent: int):
    def preexec() -> None:  # runs in the child after setuid; keep it async-signal-simple
        if not die_with_parent(signal.SIGINT, parent):  # the parent died before prctl took effect
            os._exit(1)

    return preexec


@dataclass
class LocalServer:
    """A running local server. Use :func:`start` to make one; :meth:`stop` is idempotent. It is the
    back end's :class:`core.server.Restartable` capability (:meth:`crash`, :meth:`start_again`)."""

    binaries: binaries.Binaries
    run_dir: Path
    port: int
    password: str
    proc: subprocess.Popen
    user: str | None
    janitor_keys: tuple[str, ...] = ()  # the first is the running postmaster's
    args: tuple[str, ...] = ()  # how it was started: the restart fault starts it the same way

    @property
    def admin_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user={ADMIN} password={self.password} dbname=postgres"

    def describe(self) -> str:
        who = f" as user {self.user}" if self.user else ""
        return (f"local PostgreSQL {self.binaries.version} on 127.0.0.1:{self.port}{who} "
                f"({self.binaries.source})")

    def crash(self, janitor: Janitor | None = None) -> None:
        """Stop in immediate mode (SIGQUIT), as a crash does: every session cut, no checkpoint; the
        next start replays the WAL. The data directory stays."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGQUIT)
            try:
                self.proc.wait(timeout=CRASH_TIMEOUT)
            except subprocess.TimeoutExpired:
                stop_server(self.proc.pid)
        if janitor is not None and self.janitor_keys:
            janitor.forget(self.janitor_keys[0])

    def start_again(self, janitor: Janitor | None = None) -> None:
        """Start the same data directory on the same port, as before; :class:`HarnessError` when it
        does not accept connections again (crash recovery included) within :data:`READY_TIMEOUT`."""
        log = self.run_dir / "postgres.log"
        with open(log, "ab") as logf:
            self.proc = subprocess.Popen(
                list(self.args), user=self.user, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_tie_to_parent(os.getpid()),
                cwd=self.run_dir,
            )
        if janitor is not None:
            self.janitor_keys = (janitor.register("postgres", pid=self.proc.pid), *self.janitor_keys[1:])
        _wait_ready(self, log)

    def stop(self, janitor=None) -> None:
        if self.proc.poll() is None:
            stop_server(self.proc.pid)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if janitor is not None:
            for k in self.janitor_keys:
                janitor.forget(k)


def start(*, pg_bin: str | None = None, pg_version: int | None = None, janitor=None,
          settings: dict[str, str] | None = None, progress=None) -> LocalServer:
    """initdb into a fresh run directory and start a server on a free loopback port.

    Raises :class:`HarnessError` (exit 3) with the server's own words when it cannot start.
    """
    sweep()
    user = run_as_user()
    found = binaries.find(pg_bin, pg_version)
    bins = binaries.reachable_copy(found, user, progress)
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    os.chmod(RUNS_DIR, 0o1777)  # shared by every user's runs, like /tmp itself
    run_dir = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=RUNS_DIR))
    os.chmod(run_dir, 0o755)
    keys = []
    if janitor is not None:
        keys.append(janitor.register("rmtree", path=str(run_dir)))
    (run_dir / "owner").write_text(f"{os.getpid()} {process_start_time(os.getpid())}\n")
    try:
        return _init_and_start(bins, run_dir, user, janitor, keys, settings or {})
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise


def chown(path: Path, user: str | None) -> None:
    if user:
        pw = pwd.getpwnam(user)
        os.chown(path, pw.pw_uid, pw.pw_gid)


def _init_and_start(bins, run_dir: Path, user, janitor, keys, extra: dict[str, str]) -> LocalServer:
    data = run_dir / "data"
    sock = run_dir / "sock"
    for d in (data, sock):
        d.mkdir(mode=0o700)
        chown(d, user)
    password = secrets.token_hex(16)
    pwfile = run_dir / "pwfile"
    pwfile.write_text(password + "\n")
    chown(pwfile, user)
    os.chmod(pwfile, 0o600)
    init = subprocess.run(
        [bins.tool("initdb"), "-D", str(data), "-U", ADMIN, "--pwfile", str(pwfile),
         "--auth=scram-sha-256", "--no-sync", "--no-locale", "-E", "UTF8", *_fast_login(bins)],
        user=user, capture_output=True, text=True, timeout=120, cwd=run_dir,
    )
    pwfile.unlink()
    if init.returncode != 0:
        tail = (init.stderr or init.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise HarnessError(f"initdb failed with {bins.tool('initdb')}: {tail[0]}")
    log = run_dir / "postgres.log"
    log.touch()
    chown(log, user)
    for attempt in range(3):  # a free port can be taken between our check and the bind
        port = free_port()
        conf = {**SERVER_SETTINGS, "unix_socket_directories": str(sock), "port": str(port), **extra}
        args = [bins.tool("postgres"), "-D", str(data)]
        for k, v in conf.items():
            args += ["-c", f"{k}={v}"]
        with open(log, "ab") as logf:
            proc = subprocess.Popen(
                args, user=user, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_tie_to_parent(os.getpid()), cwd=run_dir,
            )
        server = LocalServer(bins, run_dir, port, password, proc, user, args=tuple(args))
        if janitor is not None:
            server.janitor_keys = (janitor.register("postgres", pid=proc.pid), *keys)
        try:
            _wait_ready(server, log)
            return server
        except HarnessError:
            if proc.poll() is None:
                stop_server(proc.pid)
            if janitor is not None:
                janitor.forget(server.janitor_keys[0])
            if attempt == 2 or "could not bind" not in log.read_text(errors="replace"):
                raise
    raise AssertionError("unreachable")


def _fast_login(bins) -> list[str]:
    """initdb options that make a SCRAM login cheap on this throwaway server (PostgreSQL 16+).

    Each connection's SCRAM exchange runs PBKDF2 over the stored hash's iteration count (4096 by
    default: ~5 ms of the server's and the client's CPU per login, most of a worker's connect). The
    passwords here are random 128-bit tokens on a loopback-only server that lives for one run, so
    the iterations guard nothing: one iteration. ``initdb -c`` applies it to the admin's password
    and writes it into postgresql.conf, so the worker role's password (created later) gets it too.
    Only for the server the harness starts itself: a DSN's or docker's server keeps its own. Before
    16 there is no such setting: logins cost what they cost."""
    return ["-c", "scram_iterations=1"] if (bins.major or 0) >= 16 else []


def _wait_ready(server: LocalServer, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    last = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise HarnessError(f"PostgreSQL exited with code {server.proc.returncode} at start: "
                               f"{' | '.join(tail)}")
        try:
            psycopg.connect(server.admin_dsn, connect_timeout=2).close()
            return
        except psycopg.OperationalError as exc:
            last = exc
            time.sleep(0.05)
    raise HarnessError(f"PostgreSQL did not accept connections within {READY_TIMEOUT:.0f} s: {last}")
