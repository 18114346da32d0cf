"""A user's own worker, in a file outside the repository, loaded with --design and run (protocol v2):
the README's worked example, a worker that never runs the harness's body, and one that declares wrong
what its code does (issue 46), which a search says in its first run's progress and after its table."""

from __future__ import annotations

import json
import shutil

import pytest

from pg_job_chaos import ChaosSession, ChaosViolation, Settings
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.integration

SKIPS_THE_BODY = '''
from pg_job_chaos.workers import hosted
from examples_copy import MyWorker


class SkipsTheBody(MyWorker):
    """Marks every job done without running the job body: no fault can strike it."""

    name = "skips-the-body"

    def run_worker(self, ctx):
        import time
        import psycopg

        with psycopg.connect(ctx.worker_dsn, autocommit=True) as conn:
            while True:
                if conn.execute("update my_jobs set status = 'done', attempts = 1 ''' \
                '''where status = 'queued'").rowcount == 0:
                    time.sleep(ctx.poll)
'''


def test_own_worker_from_a_file_search_replay_and_options(tmp_path):
    design = tmp_path / "my_worker.py"
    shutil.copy(ROOT / "examples" / "my_worker.py", design)
    out = tmp_path / "out"
    r = run_cli("--design", f"{design}:MyWorker", "--design-option", "poll=0.02", "--faults", "crash",
                "--examples", "2", "--seed", "1", "--out", str(out), "--json", str(tmp_path / "s.json"),
                timeout=300, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    data = json.loads((tmp_path / "s.json").read_text())
    # Nothing in MyWorker looks at a job a dead worker left running: terminal-states, as its docstring says.
    assert data["properties"]["terminal-states"]["status"] == "violated"
    assert "stuck running" in data["properties"]["terminal-states"]["evidence"] or \
        "still running" in data["properties"]["terminal-states"]["evidence"]
    saved = json.loads((out / data["counterexample"]["file"].rpartition("/")[2]).read_text())
    assert saved["design_options"] == {"poll": "0.02"} and saved["design"] == f"{design}:MyWorker"
    # The replay takes the design and its options from the file, and fails the same way.
    r = run_cli("replay", data["counterexample"]["file"], "--json", str(tmp_path / "r.json"), timeout=300,
                cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["properties"]["terminal-states"]["status"] == \
        "violated"


def test_a_worker_that_never_runs_the_body_is_not_all_held(tmp_path):
    shutil.copy(ROOT / "examples" / "my_worker.py", tmp_path / "examples_copy.py")
    (tmp_path / "skips.py").write_text(SKIPS_THE_BODY)
    r = run_cli("--design", f"{tmp_path / 'skips.py'}:SkipsTheBody", "--faults", "crash", "--examples", "1",
                "--seed", "1", "--out", str(tmp_path / "out"), "--json", str(tmp_path / "s.json"),
                timeout=300, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "NO FAULT COULD STRIKE" in r.stdout
    props = json.loads((tmp_path / "s.json").read_text())["properties"]
    assert "held" not in {p["status"] for p in props.values()}


def test_unknown_design_option_is_a_usage_error(tmp_path):
    shutil.copy(ROOT / "examples" / "my_worker.py", tmp_path / "w.py")
    r = run_cli("--design", f"{tmp_path / 'w.py'}:MyWorker", "--design-option", "speed=3",
                "--faults", "crash", timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "unknown option 'speed'; options: poll" in r.stderr


def test_the_plugin_session_applies_the_command_lines_rules(tmp_path, runner):
    """The pytest plugin's session builds the same Report: a worker that never runs the body fails the
    search, and a saved counterexample is stamped and keeps its design options."""
    shutil.copy(ROOT / "examples" / "my_worker.py", tmp_path / "examples_copy.py")
    (tmp_path / "skips.py").write_text(SKIPS_THE_BODY)
    session = ChaosSession(runner, Settings(out=tmp_path / "out", root=tmp_path, time_scale=0.5))
    skipped = session.search(design=f"{tmp_path / 'skips.py'}:SkipsTheBody",
                             faults="crash", examples=1, seed=1)
    assert not skipped.held and skipped.failures and skipped.failures[0].startswith("NO FAULT COULD STRIKE")
    with pytest.raises(ChaosViolation, match="NO FAULT COULD STRIKE"):
        skipped.assert_held()
    shutil.copy(ROOT / "examples" / "my_worker.py", tmp_path / "my_worker.py")
    found = session.search(design=f"{tmp_path / 'my_worker.py'}:MyWorker", design_options={"poll": "0.02"},
                           faults="crash", examples=1, seed=1)  # the small-scope pass finds it
    assert "terminal-states" in found.violated, found.explain()
    saved = json.loads(found.file.read_text())
    assert saved["design_options"] == {"poll": "0.02"} and saved["pg_version"] == runner.database.major
    assert found.replay == f"pg-job-chaos replay {found.file}"


def test_a_search_warns_of_what_the_design_declares_wrong_from_its_first_run(tmp_path):
    """``tests/own_declares.py:Forgets`` (issue 46's three mistakes) gives the false verdicts the issue
    saw (every job run without its tenant, among them) and the search says why as its first run ends
    (progress, on stderr), after its table and in its JSON; the verdicts stay as they are."""
    shutil.copy(ROOT / "tests" / "own_declares.py", tmp_path / "own_declares.py")
    r = run_cli("search", "--design", "own_declares.py:Forgets", "--examples", "1", "--seed", "1",
                "--time-scale", "0.2", "--json", str(tmp_path / "s.json"), "--out", str(tmp_path / "out"),
                timeout=300, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["properties"]["tenant-isolation"]["status"] == "violated"  # read app.tenant: never set
    checks = ("setting", "lease", "finish-time")
    assert [w.split(":")[1].strip() for w in data["design_warnings"]] == list(checks)
    progress = r.stderr.splitlines()
    first = next(i for i, line in enumerate(progress) if " -> " in line)  # the first run's line
    for name in checks:
        said = [i for i, line in enumerate(progress) if line.strip().startswith(f"WARNING: {name}: ")]
        # once, as the first run ends
        assert len(said) == 1 and said[0] == first + 1 + checks.index(name), r.stderr
        assert sum(line.startswith(f"WARNING: {name}: ") for line in r.stdout.splitlines()) == 1, r.stdout
    assert "fix: declare tenant_setting = 'app.current_tenant'" in r.stdout
