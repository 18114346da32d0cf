"""The replicated back end (``replica``): the pair starts streaming on durable settings, a failover's
old primary is rewound into the new standby (not rebuilt), what it cannot combine with is a usage
error, and a harness SIGKILLed in the middle of a failover leaves no server, directory or process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from pg_job_chaos.harness.postgres import ServerSpec, local, provision
from tests.conftest import ROOT, run_cli
from tests.integration.test_postgres import MARK_VAR, _marked, _wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("harness-processes")]


def _servers(run_dir: Path) -> list[int]:
    """Both nodes' postmasters (``run_dir/data`` and ``run_dir/standby/data``)."""
    out = subprocess.run(["pgrep", "-f", f"postgres -D {run_dir}/"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_the_pair_streams_fails_over_and_is_rewound_not_rebuilt():
    with provision(ServerSpec(replica="async")) as db:
        pair = db.replica
        assert db.settings == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
        assert "target_session_attrs=read-write" in db.admin_dsn and "target_session_attrs" in db.worker_dsn
        standby = pair.standby
        with psycopg.connect(standby.admin_dsn) as conn:
            assert conn.execute("select pg_is_in_recovery()").fetchone() == (True,)
        with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
            conn.execute("create table pgjc.probe (x int)")
        cut = pair.cut_standby()
        assert cut is not None and cut.primary_lsn  # the primary's WAL position as the receiver stopped
        with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
            conn.execute("insert into pgjc.probe values (1)")  # acknowledged; the standby never gets it
        old = pair.primary
        assert pair.last_promotion() is None
        pair.crash()
        pair.start_again()
        promotion = pair.last_promotion()
        assert promotion is not None and 0 < promotion.seconds == pair.promotions[-1]
        assert (pair.cut_standby(), pair.arm_switchover(), pair.cancel_commit_waits()) == (None, False, ())
        with psycopg.connect(db.admin_dsn, autocommit=True) as conn:  # the same DSN finds the new primary
            assert conn.execute("select current_setting('port')::int").fetchone() == (standby.port,)
            assert conn.execute("select count(*) from pgjc.probe").fetchone() == (0,)  # the lost commit
        seconds = pair.settle()
        assert seconds is not None and seconds < 10.0 and pair.standby is old  # rewound, not rebuilt
        assert (old.run_dir / "data" / "standby.signal").exists()
        with psycopg.connect(old.admin_dsn.replace("dbname=postgres", f"dbname={db.database}")) as conn:
            assert conn.execute("select pg_is_in_recovery(), (select count(*) from pgjc.probe)").fetchone() \
                == (True, 0)
        run_dir = pair.run_dir
    assert not run_dir.exists() and not _servers(run_dir)


def test_what_the_pair_does_not_combine_with_is_a_usage_error():
    for extra, words in ((["--pooler", "pgbouncer"], "takes no pooler"),
                         (["--postgres", "docker"], "needs the local server"),
                         (["--pg-version", "15"], "PostgreSQL 16 or later")):
        r = run_cli("--replica", "async", "--faults", "failover", *extra, timeout=60)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = run_cli("--faults", "failover", timeout=60)
    assert r.returncode == 2 and "needs the replicated back end" in r.stderr, r.stderr
    r = run_cli("--replica", "sync", "--faults", "restart", timeout=60)
    assert r.returncode == 2 and "does not combine with a replicated back end" in r.stderr, r.stderr


@pytest.mark.slow
def test_sigkill_mid_failover_leaves_nothing_behind(tmp_path):
    mark = f"{os.getpid()}-failover-{time.monotonic_ns()}"
    log = tmp_path / "harness.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "-v", "--design", "lease-heartbeat",
                                 "--replica", "async", "--faults", "failover", "--examples", "50"],
                                stdout=subprocess.DEVNULL, stderr=out, stdin=subprocess.DEVNULL, cwd=ROOT,
                                env=dict(os.environ, **{MARK_VAR: mark}))

    def said() -> str:
        return f"; exit {proc.poll()}; its stderr ends: {log.read_text(errors='replace')[-2000:]!r}"

    try:
        # the cut: a promotion follows it within two leases; a later example's settle rewinds
        def cut() -> bool:
            return proc.poll() is not None or " failover w" in log.read_text(errors="replace")

        struck = _wait_for(cut, 240, 0.02)
        assert struck and proc.poll() is None, "no failover struck" + said()
        run_dir = next(local.RUNS_DIR.glob(f"run-{proc.pid}-*"))
        assert len(_servers(run_dir)) == 2, "not both nodes up at the cut" + said()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(60)
        started = time.monotonic()
        left = _wait_for(lambda: not (run_dir.exists() or _servers(run_dir) or _marked(mark)), 120, 0.2)
        assert left, (f"left behind after {time.monotonic() - started:.0f} s: servers {_servers(run_dir)}, "
                      f"run directory {run_dir.exists()}, processes {_marked(mark)}" + said())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_a_client_on_the_endpoint_reaches_the_new_primary_after_a_promotion():
    """The endpoint that follows the primary (a virtual IP): one host, one port; at the promotion its open
    connections break and a new one on the same DSN is the new primary's, read-write."""
    with provision(ServerSpec(replica="async")) as db:
        pair = db.replica
        dsn = pair.one_host_dsn(db.worker_dsn)
        assert "," not in dsn and "target_session_attrs" not in dsn and f"port={pair.endpoint.port}" in dsn
        proc = pair.endpoint._proxy.proc
        standby = pair.standby
        conn = psycopg.connect(dsn, autocommit=True)
        assert conn.execute("select current_setting('port')::int").fetchone() == (pair.primary.port,)
        pair.crash()
        pair.start_again()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("select 1")  # its connection broke: the address moved
        conn.close()
        with psycopg.connect(dsn, autocommit=True) as again:
            assert again.execute("select current_setting('port')::int, pg_is_in_recovery()").fetchone() \
                == (standby.port, False)
        pair.settle()  # the old primary rewound into the standby: the endpoint stays on the new primary
        with psycopg.connect(dsn, autocommit=True) as again:
            assert again.execute("select current_setting('port')::int").fetchone() == (standby.port,)
    assert proc.poll() is not None  # the endpoint stopped with the pair
