"""The server a run needs is one typed value, :class:`~harness.postgres.ServerSpec`: the command line
builds it once from its flags, the pytest plugin from its options, and provisioning reads nothing
else. Provisioning's messages name the spec's fields, never a command-line flag. A run gets what its
faults declare they need of the server, or is refused. No database."""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from pg_job_chaos.core.errors import HarnessError, UsageError
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.harness import session
from pg_job_chaos.harness.cli import main as cli
from pg_job_chaos.harness.postgres import Database, ServerSpec, binaries, provision
from pg_job_chaos.harness.postgres.local import DURABLE_SETTINGS
from pg_job_chaos.session import ChaosSession, Settings
from tests.conftest import ROOT

FLAGS = ("--postgres", "--pg-bin", "--pg-version", "--pooler")
RESTART = Schedule(jobs=(JobSpec(1),), design="lease", events=(Event("restart", 1),))


def test_a_spec_is_validated_when_made_and_names_its_fields():
    with pytest.raises(UsageError, match=r"the server \(postgres\) 'bogus': expected local, docker"):
        ServerSpec("bogus")
    with pytest.raises(UsageError, match=r"\(pg_bin\) and a major version \(pg_version\) .*give one of them"):
        ServerSpec(pg_bin="/usr/lib/postgresql/15/bin", pg_version=15)
    with pytest.raises(UsageError, match=r"the pooler \(pooler\) 'pgpool': expected pgbouncer"):
        ServerSpec(pooler="pgpool")
    assert ServerSpec("docker:postgres:15").kind == "docker" and \
        ServerSpec("docker:postgres:15").target == "postgres:15"
    assert ServerSpec("postgresql://u@h/db").kind == "dsn" and ServerSpec().kind == "local"


def test_equal_specs_are_one_server_and_settings_are_read_only():
    assert ServerSpec(pooler="pgbouncer") == ServerSpec(pooler="pgbouncer:transaction")  # canonical
    durable = ServerSpec().with_settings(DURABLE_SETTINGS)
    assert durable == ServerSpec(settings=dict(DURABLE_SETTINGS)) and hash(durable) == hash(ServerSpec(
        settings=dict(reversed(DURABLE_SETTINGS.items()))))
    assert durable != ServerSpec() and ServerSpec().with_settings(None) == ServerSpec()
    assert len({ServerSpec(), ServerSpec("local"), durable}) == 2
    with pytest.raises(TypeError):
        durable.settings["fsync"] = "off"
    with pytest.raises(TypeError, match="give one"):
        with provision(ServerSpec(), pooler="pgbouncer"):
            pass


def _strings(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def test_provisioning_names_no_command_line_flag():
    """What harness/postgres says reaches the pytest plugin's users as well as the command line's."""
    found = [f"{p.name}: {s!r}" for p in sorted((ROOT / "harness" / "postgres").glob("*.py"))
             for s in _strings(p) if any(flag in s for flag in FLAGS)]
    assert not found, found


def test_the_binaries_messages_name_the_field(tmp_path):
    with pytest.raises(HarnessError,
                       match=r"no PostgreSQL server binaries \(initdb, postgres\) in .* \(pg_bin\)"):
        binaries.find(str(tmp_path))
    with pytest.raises(HarnessError, match=r"PostgreSQL 9 is not installed: .*, or give its binaries "
                                           r"directory \(pg_bin\)"):
        binaries.find(None, 9)


def test_the_command_line_builds_the_spec_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = cli.parse(cli.normalise(["--postgres", "docker", "--pooler", "pgbouncer:session", "--no-config"]))
    assert args.server == ServerSpec("docker", pooler="pgbouncer:session")
    args = cli.parse(["replay", "s.json", "--pg-version", "15", "--no-config"])
    assert args.server == ServerSpec(pg_version=15)
    assert cli.parse(["new-design", "x"]).server is None
    with pytest.raises(UsageError, match="give one of them"):
        cli.parse(cli.normalise(["--pg-bin", str(tmp_path), "--pg-version", "15", "--no-config"]))


def test_a_bad_server_in_the_settings_file_is_blamed_on_the_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.pg-job-chaos]\npostgres = "bogus"\n')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["search", "--faults", "crash"]) == 2
    err = capsys.readouterr().err
    assert err == (f"pg-job-chaos: the server (postgres) 'bogus': expected local, docker[:IMAGE] or a "
                   f"connection string (postgresql://...) (postgres from [tool.pg-job-chaos] in {path})\n")


def test_a_run_gets_what_its_faults_need_of_the_server(monkeypatch):
    monkeypatch.setattr(session.partition, "available", lambda: None)
    base = ServerSpec()
    assert session.for_faults(base, ["crash", "pause"]) is base
    assert session.for_faults(base, ["restart"]) == ServerSpec(settings=DURABLE_SETTINGS)
    assert session.for_faults(ServerSpec(pooler="pgbouncer"), ["restart"]).pooler == "pgbouncer:transaction"
    with pytest.raises(UsageError, match=r"the restart fault needs the local server \(postgres local\)"):
        session.for_faults(ServerSpec("postgresql://u@h/db"), ["restart"])


def _database(**kw):
    fields = {"server": "local PostgreSQL 17.10 on 127.0.0.1:5", "control": object(), "spec": ServerSpec(),
              "settings": {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}}
    return Database("", "", "pgjc_x", "pgjc_x_worker", server_version=171000, **{**fields, **kw})


def test_a_server_without_what_the_faults_need_is_refused():
    session.check_server(_database(), ["crash", "pause"])
    session.check_server(_database(settings=dict(DURABLE_SETTINGS)), ["restart"])
    with pytest.raises(UsageError, match=r"the restart fault needs the server on fsync=on \(it runs off\), "
                                         r"synchronous_commit=on \(it runs off\).*for_faults"):
        session.check_server(_database(), ["restart"])
    with pytest.raises(UsageError, match="the restart fault needs the local server: it stops and starts it; "
                                         "this session's is PostgreSQL at h"):
        session.check_server(_database(control=None, server="PostgreSQL at h",
                                       settings=dict(DURABLE_SETTINGS)),
                             ["restart"])


class Used(Exception):
    """A fake runner was asked to load a design: the run went to that runner."""


class FakeRunner:
    def __init__(self, database):
        self.database = database

    def handle(self, spec, options=None):
        raise Used(self)

    def run(self, schedule, **kw):
        raise AssertionError("ran")


def test_a_chaos_session_without_servers_refuses_a_restart_before_anything_runs(tmp_path):
    s = ChaosSession(FakeRunner(_database()), Settings(out=tmp_path))
    with pytest.raises(UsageError, match="the restart fault needs the server on fsync=on"):
        s.run(RESTART)
    with pytest.raises(UsageError, match="the restart fault needs the server on fsync=on"):
        s.with_defaults(faults="restart").search(design="lease")
    with pytest.raises(Used):  # a fault that needs nothing of the server goes on
        s.search(design="lease", faults="crash")


class FakeServers:
    """harness.session.Servers' interface: one runner per what the faults need."""

    def __init__(self):
        self.plain, self.durable = (FakeRunner(_database()),
                                    FakeRunner(_database(settings=dict(DURABLE_SETTINGS))))

    def runner(self, fault_names=()):
        return self.durable if session.server_settings(ServerSpec(), fault_names) else self.plain


def test_a_chaos_session_with_servers_runs_a_restart_on_the_durable_one(tmp_path):
    servers = FakeServers()
    s = ChaosSession(servers.plain, Settings(out=tmp_path), servers=servers)
    for call in (lambda: s.run(RESTART), lambda: s.with_defaults(faults="restart").search(design="lease"),
                 lambda: s.search(design="lease", faults="crash,restart")):
        with pytest.raises(Used) as info:
            call()
        assert info.value.args[0] is servers.durable
    with pytest.raises(Used) as info:
        s.search(design="lease", faults="crash")
    assert info.value.args[0] is servers.plain


def test_servers_provision_each_spec_once_and_remove_all_last_first(monkeypatch):
    monkeypatch.setattr(session.partition, "available", lambda: None)
    log = []

    @contextlib.contextmanager
    def fake_provision(spec, **kw):
        log.append(("provision", dict(spec.settings)))
        yield SimpleNamespace(spec=spec)
        log.append(("drop", dict(spec.settings)))

    @contextlib.contextmanager
    def fake_runner(database):
        yield SimpleNamespace(database=database)
        log.append(("close runner", dict(database.spec.settings)))

    monkeypatch.setattr(session, "provision", fake_provision)
    monkeypatch.setattr(session, "Runner", fake_runner)
    with session.Servers(ServerSpec()) as servers:
        base = servers.database()
        assert servers.database(["crash"]) is base and servers.runner().database is base
        durable = servers.runner(["restart"])
        assert durable is servers.runner(["restart", "pause"]) and \
            durable.database.spec.settings == DURABLE_SETTINGS
        assert log == [("provision", {}), ("provision", DURABLE_SETTINGS)]
    assert log[2:] == [("close runner", DURABLE_SETTINGS), ("drop", DURABLE_SETTINGS), ("close runner", {}),
                       ("drop", {})]
