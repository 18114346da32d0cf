"""A body pool never lends a connection the server already cut (docs/reference/contract.md, "Body
connections"): the harness's own pool and the contract clients check a kept connection before a job
gets it. Without the check, a body after a restart or a promotion fails on "server closed the
connection unexpectedly" and the queue counts an attempt the harness burned.

Each test cuts the idle connection the way a restart does to it (``pg_terminate_backend`` of its
backend, from the owner's connection) and then borrows: the borrower gets a working connection on a
new backend. With psycopg_pool's default (no ``check``) the first of these fails: the pool hands back
the dead connection (``test_an_unchecked_pool_lends_the_cut_connection`` shows it, so the others can
fail)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pg_job_chaos.workers.hosted import jvm
from pg_job_chaos.workers.hosted.contract import url
from pg_job_chaos.workers.tenant.modes import MODES
from tests.conftest import ROOT
from tests.hosted_runs import NODE_DIR, node_missing

pytestmark = pytest.mark.integration

CLIENTS = ROOT / "workers" / "clients"


def _cut(admin_dsn: str, backend: int) -> None:
    """End *backend* as a restart would, and wait until the server has let it go."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute("select pg_terminate_backend(%s)", [backend])
        for _ in range(200):
            if conn.execute("select count(*) from pg_stat_activity where pid = %s",
                            [backend]).fetchone() == (0,):
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {backend} still there")


@pytest.mark.parametrize("mode", ["local", "session-autocommit", "reset"])
def test_the_harness_pool_replaces_a_cut_connection_before_lending_it(database, mode):
    pool = MODES[mode].pool(database.worker_dsn, size=1, name="test-body-pool")
    try:
        with pool.connection() as conn:
            first = conn.info.backend_pid
        _cut(database.admin_dsn, first)
        with pool.connection() as conn:
            assert conn.execute("select 1").fetchone() == (1,)
            assert conn.info.backend_pid != first
    finally:
        pool.close()


def test_an_unchecked_pool_lends_the_cut_connection(database):
    """What the check is for: psycopg_pool without ``check`` hands the cut connection to the next job."""
    pool = ConnectionPool(database.worker_dsn, min_size=1, max_size=1, open=False, name="unchecked")
    pool.open(wait=True, timeout=10)
    try:
        with pool.connection() as conn:
            first = conn.info.backend_pid
        _cut(database.admin_dsn, first)
        with pytest.raises(psycopg.OperationalError):
            with pool.connection() as conn:
                conn.execute("select 1")
    finally:
        pool.close()


def _spec(tmp_path, dsn: str) -> str:
    spec = {"contract": 1, "identity": "w-body-pool", "dsn": dsn, "seconds": {"lease": 1, "poll": 0.1},
            "watch": [], "log": str(tmp_path / "w.log.jsonl"), "pool_size": 1, "dequeues": None,
            "strike_wait": 1, "tenant": {"autocommit": False}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return str(path)


PYTHON_CLIENT = """
import json, sys
import psycopg
import pgjc_contract

client = pgjc_contract.Client(sys.argv[1])
conn = client.borrow()
first = conn.info.backend_pid
client.release(conn)
with psycopg.connect(sys.argv[2], autocommit=True) as admin:
    admin.execute("select pg_terminate_backend(%s)", [first])
    while admin.execute("select count(*) from pg_stat_activity where pid = %s", [first]).fetchone()[0]:
        pass
conn = client.borrow()
print(json.dumps({"first": first, "second": conn.info.backend_pid,
                  "answer": conn.execute("select 1").fetchone()[0]}))
"""

NODE_CLIENT = """
const pg = require('pg');
const { Client } = require('pgjc-contract.js');
(async () => {
  const client = new Client(process.argv[2]);
  let conn = await client.borrow();
  const first = conn.processID;
  client.release(conn, false);
  const admin = new pg.Client({ connectionString: process.argv[3] });
  await admin.connect();
  await admin.query('select pg_terminate_backend($1)', [first]);
  const gone = 'select count(*)::int as n from pg_stat_activity where pid = $1';
  while ((await admin.query(gone, [first])).rows[0].n) {}
  await admin.end();
  conn = await client.borrow();
  const answer = (await conn.query('select 1 as one')).rows[0].one;
  console.log(JSON.stringify({ first, second: conn.processID, answer }));
  process.exit(0);
})().catch((err) => { console.error(err); process.exit(3); });
"""


def _client_run(argv: list[str], env: dict[str, str]) -> dict:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_python_client_replaces_a_cut_connection_before_lending_it(database, tmp_path):
    script = tmp_path / "borrow.py"
    script.write_text(PYTHON_CLIENT)
    env = {"PYTHONPATH": str(CLIENTS / "python"), "PATH": "/usr/bin:/bin"}
    out = _client_run([sys.executable, str(script), _spec(tmp_path, database.worker_dsn), database.admin_dsn],
                      env)
    assert out["answer"] == 1
    assert out["second"] != out["first"]


def test_the_node_clients_borrow_after_a_cut_gives_a_working_connection(database, tmp_path):
    """Not a proof of the check, and named so: here the Node client's ``'error'`` listener sees the
    termination too (the server sends it while the script awaits its own queries), so this passes without
    ``alive`` as well; it holds the borrow's behaviour (a new backend, answering) with ``alive`` in its
    path. ``alive`` is for a connection
    cut while the client was told nothing yet (a socket a proxy keeps open, a borrow in the same tick)."""
    missing = node_missing()
    if missing:
        pytest.skip(missing)
    script = tmp_path / "borrow.js"
    script.write_text(NODE_CLIENT)
    env = {"NODE_PATH": f"{CLIENTS / 'node'}:{NODE_DIR / 'node_modules'}",
           "PATH": "/usr/local/bin:/usr/bin:/bin"}
    spec = _spec(tmp_path, url(database.worker_dsn))  # node-postgres reads URLs, as the harness gives it
    out = _client_run(["node", str(script), spec, url(database.admin_dsn)], env)
    assert out["answer"] == 1
    assert out["second"] != out["first"]


JAVA_CLIENT = """
import java.sql.*;
import pgjc.Client;
import pgjc.Dsn;

public class Borrow {
  public static void main(String[] argv) throws Exception {
    Client client = new Client(); // the spec PGJC_CONTRACT names
    Connection conn = client.borrow();
    int first = Client.backend(conn);
    client.release(conn, false);
    Dsn.Jdbc admin = Dsn.parse(argv[0]);
    try (Connection a = DriverManager.getConnection(admin.url(), admin.props());
         PreparedStatement kill = a.prepareStatement("select pg_terminate_backend(?)");
         PreparedStatement gone = a.prepareStatement("select count(*) from pg_stat_activity where pid = ?")) {
      kill.setInt(1, first);
      kill.execute();
      gone.setInt(1, first);
      while (true) {
        try (ResultSet rs = gone.executeQuery()) {
          rs.next();
          if (rs.getInt(1) == 0) break;
        }
      }
    }
    conn = client.borrow();
    try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("select 1")) {
      rs.next();
      System.out.println("{\\"first\\": " + first + ", \\"second\\": " + Client.backend(conn)
          + ", \\"answer\\": " + rs.getInt(1) + "}");
    }
    Runtime.getRuntime().halt(0);
  }
}
"""


def test_the_java_client_replaces_a_cut_connection_before_lending_it(database, tmp_path):
    """PgJDBC hears nothing of a termination until it next uses the socket: without ``Client.alive``
    (``isValid``, an empty statement) the second borrow would lend the cut connection and ``select 1``
    would fail. The client's first connection opens at its start (as HikariCP's minimum does): the one cut."""
    missing = jvm.missing()
    if missing:
        pytest.skip(missing)
    script = tmp_path / "Borrow.java"
    script.write_text(JAVA_CLIENT)
    java = jvm.command("reference")[0]
    spec = _spec(tmp_path, url(database.worker_dsn))
    env = {"PGJC_CONTRACT": spec, "PATH": "/usr/bin:/bin"}
    argv = [java, *jvm.JVM_OPTIONS, "-cp", str(jvm.jar()), str(script), url(database.admin_dsn)]
    out = _client_run(argv, env)
    assert out["answer"] == 1
    assert out["second"] != out["first"]
