"""A design is built once per process: the command line's search (with parallel slots, which inherit
the handle by fork), compare and replay, and the pytest plugin's session each construct it once.

The design is a user's worker from a file whose constructor appends ``pid`` to a file: the count of
lines is the count of constructions, in every process that made one."""

from __future__ import annotations

import json
import shutil

import pytest

from pg_job_chaos import ChaosSession, JobSpec, Schedule, Settings
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.integration

COUNTED = '''
import os
from my_worker import MyWorker

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "constructions.log")


class Counted(MyWorker):
    name = "counted"

    def __init__(self, **options):
        super().__init__(**options)
        with open(LOG, "a") as f:
            f.write(f"{os.getpid()}\\n")
'''


def _design(tmp_path):
    shutil.copy(ROOT / "examples" / "my_worker.py", tmp_path / "my_worker.py")
    (tmp_path / "counted.py").write_text(COUNTED)
    return f"{tmp_path / 'counted.py'}:Counted", tmp_path / "constructions.log"


def _count(log) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_a_search_with_slots_and_its_replay_build_the_design_once_each(tmp_path):
    design, log = _design(tmp_path)
    r = run_cli("--design", design, "--design-option", "poll=0.02", "--faults", "crash", "--examples", "2",
                "--seed", "1", "--parallel", "3", "--out", str(tmp_path / "out"), "--json",
                str(tmp_path / "s.json"), timeout=300, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "3 slots" in r.stderr + r.stdout, "the search did not run with slots: the check would be vacuous"
    assert len(_count(log)) == 1, f"constructed in pids {_count(log)}"
    # MyWorker leaves a crashed job running (terminal-states, tests/integration/test_own_worker.py):
    # there is always a counterexample to replay.
    data = json.loads((tmp_path / "s.json").read_text())
    log.unlink()
    r = run_cli("replay", data["counterexample"]["file"], timeout=300, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert len(_count(log)) == 1, f"replay constructed it in pids {_count(log)}"


def test_a_chaos_session_builds_the_design_once_across_its_searches_and_runs(tmp_path, database):
    from pg_job_chaos.harness.runner import Runner

    design, log = _design(tmp_path)
    with Runner(database) as runner:
        session = ChaosSession(runner, Settings(out=tmp_path / "out", root=tmp_path))
        session.search(design=design, design_options={"poll": "0.02"}, faults="", examples=1, seed=1)
        session.search(design=design, design_options={"poll": "0.02"}, faults="raise", examples=1, seed=2)
        session.run(Schedule(jobs=(JobSpec(1),), design=design, design_options={"poll": "0.02"}), save=False)
    assert len(_count(log)) == 1, f"constructed in pids {_count(log)}"
