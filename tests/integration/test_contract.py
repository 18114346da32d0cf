"""The worker contract (docs/contract.md) and its four clients, Python, Node, Go and Java, on real PostgreSQL.

The conformance test a new client must pass is :func:`test_a_client_passes_check_design` (every
check of ``check-design``: states mapped, attempts read back, the body reached, each fault struck
at its point, quiescent runs), :func:`test_statement_points_reach_the_supervisor` (a statement of
the queue's own is a strike point the supervisor's pause reaches and lets go on) and
:func:`test_both_clients_judge_alike` (the same reference queue in two runtimes gets the same
verdicts: a subprocess's records are the harness's records). Add a client to :data:`CLIENTS`."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.properties import check
from pg_job_chaos.workers.body import statements
from pg_job_chaos.workers.hosted import contract, golang, jvm
from tests.conftest import ROOT, run_cli
from tests.hosted_runs import node_missing

pytestmark = pytest.mark.integration

CLIENTS = {
    "python": (f"{sys.executable} examples/contract/worker.py", None),
    "node": ("node examples/contract/worker.js", node_missing()),
    # built once a session, when a test first asks (workers/hosted/golang.py caches the binary)
    "go": (lambda: f"{golang.command('reference')} examples/contract/queue.sql", golang.missing()),
    # the jar, built once a session likewise (workers/hosted/jvm.py caches it)
    "java": (lambda: shlex.join(jvm.command("reference", "examples/contract/queue.sql")), jvm.missing()),
}


def _command(name: str) -> str:
    command, missing = CLIENTS[name]
    if missing:
        pytest.skip(missing)
    return command() if callable(command) else command


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_client_passes_check_design(client):
    r = run_cli("check-design", "contract", "--design-option", f"command={_command(client)}",
                "--time-scale", "0.2", "-q", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all 34 checks held" in r.stdout, r.stdout


def _claim_point(client: str) -> str:
    """The reference queue's claim as *client* sends it: psycopg its ``%(name)s`` text, node-postgres
    the same with ``$n`` placeholders (each runtime's own text is its digest: stable within it)."""
    sys.path.insert(0, str(contract.CLIENTS / "python"))
    try:
        import pgjc_contract
    finally:
        sys.path.pop(0)
    text = pgjc_contract.load_sql(str(ROOT / "examples" / "contract" / "queue.sql"))["claim"]
    point = pgjc_contract.digest(text)
    assert point == statements.name_of(text)  # the client digests a statement as the harness does
    if client in ("node", "go"):  # node-postgres and pgx number the placeholders; the claim has %(lease)s
        return pgjc_contract.digest(text.replace("%(lease)s", "$1"))
    if client == "java":  # JDBC's placeholder is ?
        return pgjc_contract.digest(text.replace("%(lease)s", "?"))
    return point


def _schedule(client: str, **kw) -> Schedule:
    base = dict(jobs=(JobSpec(1, tenant=1),), workers=2, design="contract", time_scale=0.2,
                design_options={"command": _command(client)})
    return Schedule(**{**base, **kw})


@pytest.mark.parametrize("client", list(CLIENTS))
def test_statement_points_reach_the_supervisor(client, runner):
    point = _claim_point(client)
    h = runner.run(_schedule(client, workers=3, events=(Event(fault="pause", job=None, point=point),)))
    clients = {r["client"] for r in h.records if r.get("event") == "contract-client"}
    seen = [r for r in h.records if r.get("event") == "statement" and r.get("point") == point]
    assert seen and {r["pid"] for r in seen} <= clients, \
        "the client process reported its claim as a statement point"
    waits = [r for r in h.records if r.get("event") == "point" and r.get("point") == point]
    assert waits, "a worker waited at the claim for the supervisor"
    assert any(i.get("fault") == "pause" and i.get("point") == point for i in h.injected), h.injected
    assert not [r for r in h.records if r.get("event") == "point-timeout"], "the go reached the client"
    assert {s["id"]: s["status"] for s in h.jobs} == {1: "done"}
    assert h.ended_by == "quiescent", h.ended_by


@pytest.mark.parametrize("client", list(CLIENTS))
def test_both_clients_judge_alike(client, runner):
    """The reference queue has no reaper: a job whose every attempt crashes stays running with an
    expired lease (terminal-states), and a raise is retried to done. In either runtime."""
    h = runner.run(_schedule(client, jobs=(JobSpec(1, tenant=1), JobSpec(2, tenant=2))))
    free = check(h)
    violated = {n for n, r in free.items() if r.status == "violated"}
    if violated:
        # A worker starved past its 0.2 s lease (a JVM's pause, a busy machine: CI saw it beside two busy
        # loops) is a pause the schedule did not draw: the queue's claim takes a running job whose lease
        # expired, so the job ran again -- what a takeover costs, and nothing else.
        assert violated <= {"single-commit", "at-most-once-effects", "no-overlap"}, \
            {n: free[n].evidence for n in violated}
        attempts: dict[int, set] = {}
        for ex in h.executions():
            attempts.setdefault(ex.job, set()).add(ex.attempt)
        # a re-claim: the job ran again as a later attempt (the claim counts it), not the same one twice
        assert any(len(a) > 1 for a in attempts.values()), attempts
    crash = check(runner.run(_schedule(client, jobs=(JobSpec(1, tenant=1, fault="crash"),), workers=1)))
    assert crash["terminal-states"].status == "violated", crash["terminal-states"].evidence
    assert crash["tenant-isolation"].status == "held"
    raised = runner.run(_schedule(client, jobs=(JobSpec(1, tenant=1, fault="raise", strikes=1),), workers=1))
    verdicts = check(raised)
    assert verdicts["transient-recovers"].status == "held", verdicts["transient-recovers"].evidence
    assert {s["id"]: (s["status"], s["attempts"]) for s in raised.jobs} == {1: ("done", 2)}


def test_a_broken_client_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("print('not json')\n")
    r = run_cli("check-design", "contract", "--design-option", f"command={sys.executable} {bad}", timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "does not describe itself" in r.stderr and "no JSON line" in r.stderr
    assert "Traceback" not in r.stderr


def test_urls_for_every_runtime():
    assert contract.url("host=127.0.0.1 port=5432 dbname=d user=u password=p@x") == \
        "postgresql://u:p%40x@127.0.0.1:5432/d"
    assert contract.url("postgresql://a@b/c") == "postgresql://a@b/c"


JAVA_DSN = """
import pgjc.Dsn;

public class Urls {
  public static void main(String[] argv) {
    for (String dsn : argv) {
      Dsn.Jdbc j = Dsn.parse(dsn);
      System.out.println(j.url() + " " + new java.util.TreeMap<>(j.props()));
    }
  }
}
"""


def test_the_java_client_reads_libpq_urls_as_pgjdbc_takes_them(tmp_path):
    """The harness's DATABASE_URL (libpq's) as PgJDBC's URL and properties: a multi-host URL kept,
    read-write as PgJDBC's primary, hostaddr as the host, libpq's keepalive knobs dropped (PgJDBC sets
    none: the kernel's), the password decoded."""
    if (missing := jvm.missing()) is not None:
        pytest.skip(missing)
    script = tmp_path / "Urls.java"
    script.write_text(JAVA_DSN)
    urls = ["postgresql://u:p%40x@127.0.0.1:5432/d",
            "postgresql://w@127.0.0.1:5001,127.0.0.1:5002/db?target_session_attrs=read-write&connect_timeout=5",
            "postgresql://w@localhost:5433/db?hostaddr=127.0.0.2&keepalives=1&keepalives_idle=5&tcp_user_timeout=10000"]
    r = subprocess.run([jvm.command("reference")[0], "-cp", str(jvm.jar()), str(script), *urls],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "jdbc:postgresql://127.0.0.1:5432/d {password=p@x, user=u}",
        "jdbc:postgresql://127.0.0.1:5001,127.0.0.1:5002/db "
        "{connectTimeout=5, targetServerType=primary, user=w}",
        "jdbc:postgresql://127.0.0.2:5433/db {tcpKeepAlive=true, user=w}"]
