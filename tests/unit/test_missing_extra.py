"""A hosted library that is not installed is a usage error (exit 2) before any server starts, with the
install command a user of the wheel types: search, replay and compare load their designs first """ \
"""(no database)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness import session
from pg_job_chaos.harness.cli import main as cli
from pg_job_chaos.workers import LIBRARIES, LIBRARIES_EXTRA, OTHER_RUNTIMES
from tests.conftest import ROOT, run_cli

EXTRA = "pip install 'pg-job-chaos[libraries]'"


@pytest.fixture(autouse=True)
def _sigterm():
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


@pytest.fixture
def provisioned(monkeypatch):
    """Every call of the provisioning the commands go through (none expected); it never starts one."""
    calls = []

    def provision(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a server was provisioned")

    monkeypatch.setattr(session, "provision", provision)
    return calls


def without(monkeypatch, library: str, adapter: str | None = None) -> None:
    """As if *library* (a module) were not installed: its import fails, and its adapter (by default the
    module of the same name) is imported anew."""
    monkeypatch.setitem(sys.modules, library, None)
    monkeypatch.delitem(sys.modules, f"pg_job_chaos.adapters.{adapter or library}", raising=False)


def adapter_of(design: str) -> str:
    """The adapter module of a hosted library's design name (``django-tasks-db``: ``django_tasks``)."""
    return LIBRARIES[design].partition(":")[0].rpartition(".")[2]


# The module an adapter imports its library by, where it is not the adapter's own name.
IMPORTED_AS = {"django-tasks-db": "django_tasks"}


def test_the_extra_is_named_as_a_wheel_user_installs_it():
    assert LIBRARIES_EXTRA == EXTRA


# The libraries hosted in this interpreter (pg-boss, graphile-worker and oban run in another runtime
# through the worker contract: a missing runtime is its own usage error).
PYTHON_LIBRARIES = sorted(n for n in LIBRARIES if n not in OTHER_RUNTIMES)


@pytest.mark.parametrize("library", PYTHON_LIBRARIES)
@pytest.mark.parametrize("command", ["search", "replay", "compare"])
def test_a_missing_library_fails_before_provisioning(monkeypatch, capsys, tmp_path, provisioned, library,
                                                     command):
    adapter, module = adapter_of(library), IMPORTED_AS.get(library, adapter_of(library))
    without(monkeypatch, module, adapter)
    argv = {"search": ["search", "--design", library, "--examples", "1", "--time-scale", "1"],
            "compare": ["compare", "--designs", f"lease,{library}", "--time-scale", "1"],
            "replay": ["replay", str(tmp_path / "s.json")]}[command]
    (tmp_path / "s.json").write_text(Schedule(jobs=(JobSpec(1),), design=library, time_scale=1.0).to_json())
    assert cli.main([*argv, "--out", str(tmp_path)] if command != "replay" else argv) == 2
    err = capsys.readouterr().err
    assert err == (f"pg-job-chaos: --design {library}: cannot import pg_job_chaos.adapters.{adapter}: "
                   f"import of {module} halted; None in sys.modules (the hosted libraries install with "
                   f"{EXTRA})\n"), err
    assert provisioned == []


def test_without_the_library_installed_through_the_real_command_line(tmp_path):
    """In its own process, with ``procrastinate`` missing as it is from a wheel installed without the
    extra: exit 2 at once, the install command, and no progress line of a server."""
    missing = tmp_path / "site" / "procrastinate"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'procrastinate'\", "
                                         "name='procrastinate')\n")
    env = dict(os.environ, PYTHONPATH=f"{missing.parent}{os.pathsep}{ROOT}")
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), "search", "--design", "procrastinate",
                        "--examples", "1", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == ("pg-job-chaos: --design procrastinate: cannot import "
                        "pg_job_chaos.adapters.procrastinate: No module named 'procrastinate' "
                        f"(the hosted libraries install with {EXTRA})\n"), r.stderr
    assert not (tmp_path / "out").exists()


def test_a_design_file_whose_import_fails_is_a_usage_error_before_any_server(monkeypatch, capsys, tmp_path,
                                                                            provisioned):
    design = tmp_path / "mydesign.py"
    design.write_text("import not_a_real_module_xyz\n")
    assert cli.main(["search", "--design", f"{design}:Mine", "--examples", "1"]) == 2
    err = capsys.readouterr().err
    assert f"--design {design}:Mine: cannot import {design}: No module named 'not_a_real_module_xyz'" in err
    assert "pip install" not in err and provisioned == []
    # the same through the real command line: one line, no traceback, no server's progress line
    r = run_cli("search", "--design", f"{design}:Mine", "--examples", "1", timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "PostgreSQL" not in r.stderr, r.stderr
