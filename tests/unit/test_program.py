"""One program, one name: ``pg-job-chaos`` (the console script), ``python -m pg_job_chaos`` and a
checkout's ``python run.py`` are the same command line, and every message names ``pg-job-chaos``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import pg_job_chaos
from pg_job_chaos.harness.cli import main as cli
from tests.conftest import ROOT, run_cli


@pytest.fixture(autouse=True)
def _sigterm():
    """``main()`` installs its SIGTERM handler; the suite's process keeps its own."""
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


def run_module(*args: str) -> subprocess.CompletedProcess:
    """``python -m pg_job_chaos ARGS`` from the checkout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pg_job_chaos", *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("argv", [["--version"], ["search", "--version"], ["--design", "lease", "--version"],
                                  ["replay", "--version"], ["experiment", "--version"]])
def test_version_prints_the_program_and_its_version(argv, capsys):
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    assert out.out == f"pg-job-chaos {pg_job_chaos.__version__}\n" and out.err == ""


def test_version_through_run_py_and_python_m():
    want = f"pg-job-chaos {pg_job_chaos.__version__}"
    for r in (run_cli("--version", timeout=60), run_module("--version")):
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == want


def test_python_m_pg_job_chaos_is_the_cli():
    r = run_module("--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: pg-job-chaos ") and "--version" in r.stdout
    assert "search" in r.stdout and "run.py" not in r.stdout
    r = run_module("--list-faults")
    assert r.returncode == 0 and "crash" in r.stdout, r.stderr
    r = run_module("--bogus")  # the same error boundary: one line, exit 2
    assert r.returncode == 2 and r.stderr == "pg-job-chaos: unrecognized arguments: --bogus (see --help)\n"


@pytest.mark.parametrize(("argv", "prefix"), [
    (["--bogus"], "pg-job-chaos: "),
    (["replay"], "pg-job-chaos replay: "),
    (["compare", "--examples", "x"], "pg-job-chaos compare: "),
    (["experiment", "nope"], "pg-job-chaos experiment: "),
])
def test_usage_errors_and_help_name_pg_job_chaos(argv, prefix, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(prefix) and "run.py" not in err, err
    for sub in ([], ["search"], ["replay"], ["compare"], ["experiment"], ["bench"]):
        assert cli.main([*sub, "--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: {' '.join(['pg-job-chaos', *sub])} ") and "run.py" not in out, out
