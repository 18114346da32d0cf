"""Shared fixtures. One throwaway PostgreSQL per test session, started only if a test asks for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)  # tests of the pytest plugin (pg_job_chaos.plugin) run user projects

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def database():
    from harness.postgres import provision

    with provision() as db:
        yield db


@pytest.fixture(scope="session")
def runner(database):
    from harness.runner import Runner

    with Runner(database) as r:
        yield r


def run_cli(*args: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` as a user would run it; never hangs the suite."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env, stdin=subprocess.DEVNULL)
