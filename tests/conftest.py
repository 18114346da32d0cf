"""Shared fixtures. One throwaway PostgreSQL per test session, started only if a test asks for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)  # tests of the pytest plugin (pg_job_chaos.plugin) run user projects

ROOT = Path(__file__).resolve().parent.parent


# Slots for the searches of the suite (harness/slots.py): their small-scope passes run this many at a
# time. Three on a 2-core machine: measured, four judged every schedule as one slot did.
TEST_SLOTS = 3
_slots: list = []


@pytest.fixture(scope="session")
def database():
    from pg_job_chaos.harness.postgres import provision
    from pg_job_chaos.harness.slots import Slots

    # The slots are cloned first: a template database must have no session open while it is copied.
    with provision() as db, Slots(db, TEST_SLOTS) as slots:
        _slots.append(slots)
        yield db
        _slots.clear()


@pytest.fixture(scope="session")
def runner(database):
    """The session's runner; ``runner.slots`` runs batches of schedules at once (pass
    :func:`parallel_options` to a search)."""
    from pg_job_chaos.harness.runner import Runner

    with Runner(database) as r:
        r.slots = _slots[0]
        yield r


def parallel_options(runner) -> dict:
    """What a search in the suite passes to run its small-scope pass on the session's slots."""
    return {"run_many": runner.slots.run_many, "parallel": runner.slots.n}


def run_cli(*args: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` as a user would run it; never hangs the suite."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def compare_cli(tmp_path_factory):
    """One ``--compare`` through the command line, writing ``c.json`` and ``compare.html`` into the
    directory it returns with the process: ``tests/integration/test_cli.py`` reads the JSON,
    ``test_html.py`` opens the page (one compare where two cost the suite a minute)."""
    d = tmp_path_factory.mktemp("compare")
    r = run_cli("--compare", "--designs", "one-transaction,lease-heartbeat", "--faults", "crash",
                "--time-scale", "0.2", "--examples", "3", "--seed", "2", "--workers", "1",
                "--json", str(d / "c.json"), "--html", str(d / "compare.html"), timeout=600)
    return r, d

