"""The replicated back end (``ServerSpec.replica``: ``async`` or ``sync``): a primary and a streaming
standby that the harness owns, both in one run directory, as its unprivileged user, on free loopback
ports, registered with the janitor like the local server (:mod:`harness.postgres.local`).

Clients reach the primary as a deployment does: :attr:`Pair.admin_dsn` (and every DSN provisioning
derives from it) names both nodes with ``target_session_attrs=read-write``, so after a promotion a new
connection finds the new primary. Both nodes run on durable settings (``fsync``, ``full_page_writes``
on; ``synchronous_commit`` on, ``remote_apply`` for ``sync``) with ``wal_log_hints`` and
``wal_keep_size`` so that the old primary can be rewound.

:func:`start` starts it: the primary as the local server starts one, with the pair's settings also
kept in its data directory; a standby base-backed up from it into the run directory's ``standby/``,
started on a free port and streaming; then the pair settled. The pair is the back end's
:class:`core.server.Replicated` capability: the failover fault (``faults/failover.py``) drives it
through the supervisor (:meth:`Pair.crash` stops the primary, :meth:`Pair.start_again` promotes the
standby, as the restart fault's stop and start; :meth:`Pair.cut_standby`,
:meth:`Pair.arm_switchover`, :meth:`Pair.cancel_commit_waits`, :meth:`Pair.last_promotion`;
:meth:`Pair.demote_in_place` promotes the standby with the old primary left up, read-only). Before
each run the runner calls :meth:`Pair.settle`: the old primary is rewound with ``pg_rewind`` and started
as the new standby (never rebuilt), a cut receiver reconnected, and the run starts only once the
standby has replayed everything the primary has (lag is only what a fault makes).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from ...core import sqlfile
from ...core.errors import HarnessError
from ...core.procs import killpg
from ...core.server import Cut, Janitor, Promotion
from ..net.endpoint import Endpoint
from . import local
from .local import ADMIN, DURABLE_SETTINGS, LocalServer, chown

Q = sqlfile.load(__file__, "replica.sql", "current_lsn", "replayed", "receivers",
                 "set_conninfo", "set_sync_names", "set_read_only", "reset_read_only", "reload",
                 "promote", "cancel_sync_waits", "persist", "checkpoint")
MODES = ("async", "sync")
REPLICATION = {"wal_level": "replica", "wal_log_hints": "on", "wal_keep_size": "512MB",
               "max_wal_senders": "10", "hot_standby": "on", "wal_receiver_status_interval": "1s"}
CATCH_UP_TIMEOUT = 60.0  # seconds for a standby to replay what its primary has
CONNECT_TIMEOUT = 5
# Seconds a pg_rewind still running at the pair's stop may take to finish before its group is killed: it
# runs the old primary's crash recovery in a single-user postgres, which, SIGKILLed, leaves its dynamic
# shared memory segment in /dev/shm (one /dev/shm/PostgreSQL.* a suite run, from the failover tests' last
# promotion); a rewind here takes about a second.
REWIND_GRACE = 15.0


def settings(mode: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The pair's server settings: *extra* under the durable and replication settings it needs."""
    sync = {"synchronous_commit": "remote_apply"} if mode == "sync" else {}
    return {**(extra or {}), **DURABLE_SETTINGS, **REPLICATION, **sync}


def _one(node: LocalServer, query, params=None):
    with psycopg.connect(node.admin_dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
        return conn.execute(query, params).fetchone()


@dataclass
class Pair:
    """A running pair: the back end's :class:`core.server.Replicated` capability. ``nodes[0]`` is the
    primary, ``nodes[1]`` the standby (None while a failover's old primary waits in :attr:`down` for
    :meth:`settle`). :meth:`stop` is idempotent."""

    mode: str
    nodes: list[LocalServer | None]
    janitor: Janitor | None = None
    down: LocalServer | None = None  # the primary a failover stopped, to be rewound
    # down still runs, read-only with its sessions open (a demote-in-place): settle() stops it first
    demoted: bool = False
    cut: bool = False  # the standby's WAL receiver is cut
    switchover: bool = False  # the next crash() is a clean (fast) stop: the standby gets everything
    stopped_at: float = 0.0
    promotions: list[float] = field(default_factory=list)  # seconds from the primary's stop to a new one
    resets: list[float] = field(default_factory=list)  # seconds settle() took after a promotion
    # pg_rewind of the old primary, started at the promotion against the live new primary (it copies
    # from an online source): the run goes on meanwhile, and settle() waits for what is left of it
    rewinding: subprocess.Popen | None = None
    checkpointed: bool = False  # settle() made a checkpoint since the data was loaded
    # the endpoint that follows the primary (harness.net.endpoint), for clients that take one host
    endpoint: Endpoint | None = None
    _rewind_key: str | None = None

    @property
    def primary(self) -> LocalServer:
        node = self.nodes[0]
        assert node is not None
        return node

    @property
    def standby(self) -> LocalServer | None:
        return self.nodes[1]

    @property
    def admin_dsn(self) -> str:
        """Both nodes, the read-write one wins: what every client of the harness's connects with."""
        a = self.primary
        b = self.standby or self.down
        ports = f"{a.port},{b.port}" if b is not None else str(a.port)
        hosts = ",".join(["127.0.0.1"] * len(ports.split(",")))
        return (f"host={hosts} port={ports} user={ADMIN} password={a.password} dbname=postgres "
                "target_session_attrs=read-write")

    @property
    def run_dir(self) -> Path:
        return min((n.run_dir for n in (*self.nodes, self.down) if n is not None), key=lambda p: len(p.parts))

    def describe(self) -> str:
        s = self.standby
        return (f"{self.primary.describe()}; a {self.mode} streaming standby on 127.0.0.1:"
                f"{s.port if s else '-'}; clients on both ports, target_session_attrs=read-write")

    def _conninfo(self, primary: LocalServer) -> str:
        return (f"host=127.0.0.1 port={primary.port} user={ADMIN} password={primary.password} "
                "application_name=pgjc_standby")

    def _set(self, node: LocalServer, template: str, **values: str) -> None:
        with psycopg.connect(node.admin_dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
            conn.execute(sql.SQL(template).format(**{k: sql.Literal(v) for k, v in values.items()}))
            conn.execute(Q.reload)

    # --- the failover fault's side (core.server.Replicated; the supervisor's Strikes calls these) ------
    def cut_standby(self) -> Cut | None:
        """The standby stops receiving WAL (returns once its receiver is gone); it keeps what it has.
        None when there is no standby to fail over to (a second failover in a run)."""
        s = self.standby
        if s is None:
            return None
        lsn = _one(self.primary, Q.current_lsn)[0]
        self._set(s, Q.set_conninfo, conninfo="")
        deadline = time.monotonic() + CATCH_UP_TIMEOUT
        while _one(s, Q.receivers)[0]:
            if time.monotonic() > deadline:
                raise HarnessError("the standby's WAL receiver did not stop after its conninfo was cut")
            time.sleep(0.01)
        self.cut = True
        return Cut(primary_lsn=str(lsn))

    def arm_switchover(self) -> bool:
        """The next :meth:`crash` is a clean stop, so the standby receives everything first. False when
        there is no standby."""
        if self.standby is None:
            return False
        self.switchover = True
        return True

    def cancel_commit_waits(self) -> tuple[int, ...]:
        """Cancel every commit waiting for the standby; their backends. Empty when there is no standby,
        or the primary already stopped (nothing waits any more)."""
        if self.standby is None:
            return ()
        try:
            with psycopg.connect(self.primary.admin_dsn, autocommit=True, connect_timeout=1) as conn:
                return tuple(r[0] for r in conn.execute(Q.cancel_sync_waits))
        except psycopg.Error:  # the primary already stopped: nothing waits any more
            return ()

    def demote_in_place(self) -> Promotion | None:
        """A managed database's failover as its clients see it: the old primary stays up with its
        sessions open, and every transaction that starts on it from now on is read-only
        (``default_transaction_read_only`` set and reloaded: one already under way may still write, and
        what it commits after the promotion is on the old node only); once the standby replayed the
        old primary's WAL as of that moment it is promoted, and the endpoint sends new connections to it
        while its open ones stay on the old node. A new connection on the multi-host DSN skips the old
        node (``target_session_attrs=read-write`` reads its ``default_transaction_read_only``). The old
        node is :attr:`down` (still running) until :meth:`settle` stops and rewinds it. None when
        there is no standby (a second failover in a run).

        Hazard: on ``sync`` the old node still waits for a standby: a write that began before the flip
        and commits after the promotion waits until :meth:`settle` stops the node (its client sees the
        session end, unacknowledged), as PostgreSQL does when its synchronous standby is gone."""
        new = self.standby
        if new is None:
            return None
        old = self.primary
        self.stopped_at = time.monotonic()
        self._set(old, Q.set_read_only, value="on")
        lsn = _one(old, Q.current_lsn)[0]
        deadline = time.monotonic() + CATCH_UP_TIMEOUT
        while not _one(new, Q.replayed, {"lsn": lsn})[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        if not _one(new, Q.promote)[0]:
            raise HarnessError(f"the standby on port {new.port} was not promoted within 60 s")
        self.nodes = [new, None]
        self.down = old
        self.demoted = True
        if self.endpoint is not None:  # the DNS flip: new connections to the new primary, old ones stay
            self.endpoint.move(new.port, keep_open=True)
        self.cut = self.switchover = False
        self.promotions.append(time.monotonic() - self.stopped_at)
        if self.mode == "sync":  # alone, a sync primary would wait for a standby forever
            self._set(new, Q.set_sync_names, names="")
        return Promotion(seconds=self.promotions[-1])

    def _stop_demoted(self, old: LocalServer) -> None:
        """Stop a demote-in-place's old node cleanly (its sessions end), its read-only setting removed
        first so that it never comes back as a standby that refuses writes once promoted."""
        try:
            self._set(old, Q.reset_read_only)
        except psycopg.Error:  # gone already: nothing of it is started again but by the rewind
            pass
        local.stop_server(old.proc.pid, grace=local.CRASH_TIMEOUT)
        old.proc.wait(timeout=2 * local.CRASH_TIMEOUT)
        if self.janitor is not None and old.janitor_keys:
            self.janitor.forget(old.janitor_keys[0])
        self.demoted = False

    def last_promotion(self) -> Promotion | None:
        """The newest promotion (:attr:`promotions`); None before the first."""
        return Promotion(seconds=self.promotions[-1]) if self.promotions else None

    def crash(self, janitor: Janitor | None = None) -> None:
        """Stop the primary: immediate (a crash: what the standby has not received is lost), or fast
        after :meth:`arm_switchover` (PostgreSQL sends the standby all WAL before it exits)."""
        if self.standby is None:
            return
        old = self.primary
        self.stopped_at = time.monotonic()
        if self.switchover:
            local.stop_server(old.proc.pid, grace=local.CRASH_TIMEOUT)
            old.proc.wait(timeout=2 * local.CRASH_TIMEOUT)
            if janitor is not None and old.janitor_keys:
                janitor.forget(old.janitor_keys[0])
        else:
            old.crash(janitor)
        self.down = old
        self.nodes = [None, self.standby]

    def start_again(self, janitor: Janitor | None = None) -> None:
        """Promote the standby (the other half of a failover); :class:`HarnessError` if it does not. With
        the primary still up (a run that ended between a cut and its promotion) the standby streams
        again instead: a sync primary's commits would otherwise wait for it forever."""
        new = self.nodes[1]
        if self.nodes[0] is not None:
            if self.cut and new is not None:
                self._set(new, Q.set_conninfo, conninfo=self._conninfo(self.primary))
                self.cut = False
            self.switchover = False
            return
        if new is None:
            return
        if self.switchover:  # after a clean stop: the receiver has everything once it is gone
            deadline = time.monotonic() + CATCH_UP_TIMEOUT
            while _one(new, Q.receivers)[0] and time.monotonic() < deadline:
                time.sleep(0.01)
        if not _one(new, Q.promote)[0]:
            raise HarnessError(f"the standby on port {new.port} was not promoted within 60 s")
        self.nodes = [new, None]
        if self.endpoint is not None:  # the virtual IP moves: one-host clients' connections break
            self.endpoint.move(new.port)
        self.cut = self.switchover = False
        self.promotions.append(time.monotonic() - self.stopped_at)
        if self.mode == "sync":  # alone, a sync primary would wait for a standby forever
            self._set(new, Q.set_sync_names, names="")
        self._start_rewind()

    # --- between runs --------------------------------------------------------------------------------
    def settle(self) -> float | None:
        """Make the pair whole and caught up: a failover's old primary rewound (``pg_rewind``) and
        started as the standby, a cut receiver reconnected, a sync primary waiting for its standby
        again; returns once the standby replayed the primary's current WAL. Returns the seconds it
        took when it rewound (the reset after a promotion), else None."""
        started = time.monotonic()
        rewound = False
        if self.down is not None:
            old = self.down
            if self.demoted:
                self._stop_demoted(old)
            self._rewind(old)
            old.start_again(self.janitor)
            self.nodes = [self.primary, old]
            self.down = None
            rewound = True
        elif self.cut and self.standby is not None:
            self._set(self.standby, Q.set_conninfo, conninfo=self._conninfo(self.primary))
            self.cut = False
        self.switchover = False
        if self.mode == "sync":
            self._set(self.primary, Q.set_sync_names, names="*")
        self.wait_caught_up()
        # the next rewind and recovery replay from the newest checkpoint before a failover: one after
        # the data is loaded (the runner's first settle) and one after each rewind keep them short
        for node in (self.primary, self.standby) if rewound or not self.checkpointed else ():
            if node is not None:
                with psycopg.connect(node.admin_dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as c:
                    c.execute(Q.checkpoint)
        self.checkpointed = True
        if rewound:
            self.resets.append(time.monotonic() - started)
            return self.resets[-1]
        return None

    def wait_caught_up(self) -> None:
        s = self.standby
        if s is None:
            return
        lsn = _one(self.primary, Q.current_lsn)[0]
        deadline = time.monotonic() + CATCH_UP_TIMEOUT
        while not _one(s, Q.replayed, {"lsn": lsn})[0]:
            if time.monotonic() > deadline:
                raise HarnessError(f"the standby did not replay the primary's WAL up to {lsn} within "
                                   f"{CATCH_UP_TIMEOUT:.0f} s")
            time.sleep(0.01)

    def _start_rewind(self) -> None:
        old = self.down
        if old is None or self.rewinding is not None or self.demoted:  # pg_rewind needs the target stopped
            return
        with open(old.run_dir / "rewind.log", "wb") as log:
            self.rewinding = subprocess.Popen(
                [old.binaries.tool("pg_rewind"), "-D", str(old.run_dir / "data"), "--no-sync",
                 f"--source-server={self.primary.admin_dsn}"], user=old.user, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=old.run_dir, start_new_session=True)
        if self.janitor is not None:  # killed with the harness, before the run directory goes: its whole
            # group (a session of its own), the single-user postgres it runs for crash recovery too
            self._rewind_key = self.janitor.register("killpg", pgid=self.rewinding.pid)

    def _end_rewind(self, *, kill: bool = False) -> int | None:
        proc = self.rewinding
        self.rewinding = None
        if proc is None:
            return None
        if kill and proc.poll() is None:
            try:
                proc.wait(timeout=REWIND_GRACE)
            except subprocess.TimeoutExpired:
                killpg(proc.pid, signal.SIGKILL)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        if self.janitor is not None and self._rewind_key is not None:
            self.janitor.forget(self._rewind_key)
        return rc

    def _rewind(self, old: LocalServer) -> None:
        self._start_rewind()  # started at the promotion, unless the pair was promoted otherwise
        if self._end_rewind() != 0:
            tail = (old.run_dir / "rewind.log").read_text(errors="replace").strip().splitlines()[-1:]
            raise HarnessError(f"pg_rewind of the old primary failed: {(tail or ['(no output)'])[0]}")
        make_standby(old.run_dir / "data", self._conninfo(self.primary), old.user)

    def one_host_dsn(self, dsn: str) -> str:
        """*dsn* for a client that takes one host: through :attr:`endpoint`, else *dsn* unchanged."""
        return self.endpoint.dsn(dsn) if self.endpoint is not None else dsn

    def stop(self, janitor: Janitor | None = None) -> None:
        self._end_rewind(kill=True)
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None
        for node in sorted((n for n in (*self.nodes, self.down) if n is not None),
                           key=lambda n: -len(n.run_dir.parts)):  # the nested one first
            node.stop(janitor)


def make_standby(data: Path, conninfo: str, user: str | None) -> None:
    """Mark *data* a standby streaming with *conninfo* (the last setting in the file wins)."""
    signal_file = data / "standby.signal"
    signal_file.touch()
    chown(signal_file, user)
    with open(data / "postgresql.auto.conf", "a") as f:
        f.write(f"primary_conninfo = '{conninfo}'\n")


# --- starting the pair ---------------------------------------------------------------------------------
def _standby_args(primary: LocalServer, data: Path, port: int, sock: Path) -> tuple[str, ...]:
    """The primary's command line with the standby's data directory, port and socket directory."""
    args = list(primary.args)
    args[args.index("-D") + 1] = str(data)
    for i, a in enumerate(args):
        if a.startswith("port="):
            args[i] = f"port={port}"
        elif a.startswith("unix_socket_directories="):
            args[i] = f"unix_socket_directories={sock}"
    return tuple(args)


def start(mode: str, *, pg_bin: str | None = None, pg_version: int | None = None,
          janitor: Janitor | None = None, extra: dict[str, str] | None = None, progress=None) -> Pair:
    """Start the primary (:func:`harness.postgres.local.start`), base-back it up into a standby in its
    run directory and start that, streaming. :class:`HarnessError` when either cannot start."""
    primary = local.start(pg_bin=pg_bin, pg_version=pg_version, janitor=janitor,
                          settings=settings(mode, extra), progress=progress)
    try:
        with psycopg.connect(primary.admin_dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
            for k, v in {**DURABLE_SETTINGS, **REPLICATION}.items():
                conn.execute(sql.SQL(Q.persist).format(name=sql.Identifier(k), value=sql.Literal(v)))
        standby = _start_standby(primary, janitor)
    except BaseException:
        primary.stop(janitor)
        raise
    pair = Pair(mode, [primary, standby], janitor)
    try:
        pair.endpoint = Endpoint(primary.port, janitor)
        pair.settle()
    except BaseException:
        pair.stop(janitor)
        raise
    return pair


def _start_standby(primary: LocalServer, janitor: Janitor | None) -> LocalServer:
    run_dir = primary.run_dir / "standby"
    run_dir.mkdir(mode=0o755)
    sock = run_dir / "sock"
    sock.mkdir(mode=0o700)
    for d in (run_dir, sock):
        chown(d, primary.user)
    data = run_dir / "data"
    env = {**os.environ, "PGPASSWORD": primary.password}
    out = subprocess.run([primary.binaries.tool("pg_basebackup"), "-D", str(data), "-X", "stream", "-c",
                          "fast", "--no-sync", "-h", "127.0.0.1", "-p", str(primary.port), "-U", ADMIN],
                         user=primary.user, capture_output=True, text=True, timeout=300, cwd=run_dir, env=env)
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise HarnessError(f"pg_basebackup of the primary failed: {tail[0]}")
    make_standby(data, f"host=127.0.0.1 port={primary.port} user={ADMIN} password={primary.password} "
                        "application_name=pgjc_standby", primary.user)
    log = run_dir / "postgres.log"
    log.touch()
    chown(log, primary.user)
    for attempt in range(3):  # a free port can be taken between our check and the bind
        port = local.free_port()
        node = LocalServer(primary.binaries, run_dir, port, primary.password, primary.proc, primary.user,
                           args=_standby_args(primary, data, port, sock))
        try:
            node.start_again(janitor)
            return node
        except HarnessError:
            if node.proc is not primary.proc and node.proc.poll() is None:
                local.stop_server(node.proc.pid)
            if attempt == 2 or "could not bind" not in log.read_text(errors="replace"):
                shutil.rmtree(run_dir, ignore_errors=True)
                raise
    raise AssertionError("unreachable")
