"""``pg-job-chaos check-design DESIGN``: the adapter self-check, through the command line, on real
PostgreSQL. A correct design passes every check (whatever guarantees it loses under the faults); a
design that hides a job from ``final_states`` or never runs the job body fails, naming the check;
an unknown design or option is a usage error before anything starts."""

from __future__ import annotations

import shutil

import pytest

from pg_job_chaos.harness.cli import check
from pg_job_chaos.workers import DESIGNS, LIBRARIES
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.integration

RUNS = len(check.FAULT_FREE_WORKERS) + len(check.JOB_FAULTS) + len(check.SUPERVISOR_FAULTS)

BROKEN = '''
import time

import psycopg

from examples_copy import MyWorker


class OmitsAJob(MyWorker):
    """Its final_states forgets the last job: the harness could never judge that job."""

    name = "omits-a-job"

    def final_states(self, conn):
        return super().final_states(conn)[:-1]


class SkipsTheBody(MyWorker):
    """Marks every job done without calling run_job: no body, no fault can strike."""

    name = "skips-the-body"

    def run_worker(self, ctx):
        with psycopg.connect(ctx.worker_dsn, autocommit=True) as conn:
            while ctx.may_dequeue():
                if conn.execute("update my_jobs set status = 'done', attempts = 1 "
                                "where status = 'queued'").rowcount == 0:
                    time.sleep(ctx.poll)
'''


def _check_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("ok ", "FAILED "))]


@pytest.mark.parametrize("design, options", [
    ("lease-heartbeat", []),  # a built-in design
    (str(ROOT / "examples" / "my_worker.py") + ":MyWorker", ["--design-option", "poll=0.02"]),  # a hosted one
], ids=["built-in", "hosted"])
def test_a_correct_design_passes_every_check(design, options, tmp_path):
    r = run_cli("check-design", design, *options, "--time-scale", "0.2", "-q", timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = _check_lines(r.stdout)
    # four checks a run: states, attempts, body, and quiescent (fault-free) or struck (a fault)
    assert len(lines) == 4 * RUNS and all(line.startswith("ok ") for line in lines), r.stdout
    struck = [line for line in lines if ": struck: " in line]
    assert len(struck) == len(check.JOB_FAULTS) + len(check.SUPERVISOR_FAULTS)
    assert any("kill at mid-work on job 1" in line and "injected list" in line for line in struck)
    assert f"all {4 * RUNS} checks held" in r.stdout
    # MyWorker leaves a crashed job running for ever: a lost guarantee, not an adapter failure
    if "MyWorker" in design:
        assert any(line.startswith("ok ") and "crash at mid-work" in line and "job 1: running" in line
                   for line in lines), r.stdout


@pytest.mark.parametrize("cls, failed", [
    ("OmitsAJob", ["states: final_states maps every job to a state: no row for job 3"]),
    ("SkipsTheBody", ["body: every job started and ended done: no job started; never started: job 1, 2, 3",
                      "struck: the execution log has crash on job 1 at mid-work: no such record"]),
])
def test_a_broken_design_fails_naming_the_check(cls, failed, tmp_path):
    shutil.copy(ROOT / "examples" / "my_worker.py", tmp_path / "examples_copy.py")
    (tmp_path / "broken.py").write_text(BROKEN)
    r = run_cli("check-design", f"broken.py:{cls}", "--time-scale", "0.2", "-q", timeout=120, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    bad = [line for line in _check_lines(r.stdout) if line.startswith("FAILED")]
    for text in failed:
        assert any(text in line for line in bad), r.stdout
    assert "checks FAILED: the harness cannot observe" in r.stdout


def test_an_unknown_design_or_option_is_a_usage_error(tmp_path):
    r = run_cli("check-design", "no-such-design", timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "unknown design 'no-such-design'" in r.stderr
    assert f"built-in designs: {', '.join(DESIGNS)}; libraries: {', '.join(LIBRARIES)}" in r.stderr
    r = run_cli("check-design", str(ROOT / "examples" / "my_worker.py") + ":MyWorker",
                "--design-option", "speed=3", timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "unknown option 'speed'; options: poll" in r.stderr, r.stderr
    r = run_cli("check-design", "lease", "--time-scale", "0", timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "--time-scale must be greater than 0" in r.stderr, r.stderr
