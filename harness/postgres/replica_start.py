"""Starting the replicated back end (:mod:`harness.postgres.replica`): the primary as the local server
starts one, with the pair's settings also kept in its data directory; a standby base-backed up from it
into the run directory's ``standby/``, started on a free port and streaming; then the pair settled."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psycopg
from psycopg import sql

from ...core.errors import HarnessError
from ..net.endpoint import Endpoint
from . import local
from .local import ADMIN, DURABLE_SETTINGS, LocalServer, chown
from .replica import CONNECT_TIMEOUT, REPLICATION, Pair, Q, make_standby, settings


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


def start(mode: str, *, pg_bin: str | None = None, pg_version: int | None = None, janitor=None,
          extra: dict[str, str] | None = None, progress=None) -> Pair:
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


def _start_standby(primary: LocalServer, janitor) -> LocalServer:
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
