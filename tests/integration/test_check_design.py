"""``pg-job-chaos check-design DESIGN``: the adapter self-check, through the command line, on real
PostgreSQL. A correct design passes every check (whatever guarantees it loses under the faults); a
design that hides a job from ``final_states`` or never runs the job body fails, naming the check; one
that declares wrong what its code does (issue 46: its tenant setting, its lease, its finishes' dates)
fails naming each check and its fix; an unknown design or option is a usage error before anything
starts."""

from __future__ import annotations

import shutil

import pytest

from pg_job_chaos.core import misdeclared
from pg_job_chaos.harness.cli import check
from pg_job_chaos.workers import DESIGNS, LIBRARIES
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.integration

RUNS = len(check.FAULT_FREE_WORKERS) + len(check.JOB_FAULTS) + len(check.SUPERVISOR_FAULTS)
# four checks a run (states, attempts, body, and quiescent or struck), and a fault-free run's of what the
# design declares (setting, lease, finish-time)
DECLARED = len(misdeclared.CHECKS)
CHECKS = 4 * RUNS + DECLARED * len(check.FAULT_FREE_WORKERS)
# a user's worker with its job and its finish in one transaction, its own tenant code, accepted_finishes
# and lease_seconds: Declares declares them right, Forgets makes issue 46's three mistakes
OWN = ROOT / "tests" / "own_declares.py"

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
    (f"{OWN}:Declares", []),  # its own tenant code, accepted_finishes and lease_seconds, declared right
], ids=["built-in", "hosted", "declares"])
def test_a_correct_design_passes_every_check(design, options, tmp_path):
    r = run_cli("check-design", design, *options, "--time-scale", "0.2", "-q", timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = _check_lines(r.stdout)
    assert len(lines) == CHECKS and all(line.startswith("ok ") for line in lines), r.stdout
    struck = [line for line in lines if ": struck: " in line]
    assert len(struck) == len(check.JOB_FAULTS) + len(check.SUPERVISOR_FAULTS)
    assert any("kill at mid-work on job 1" in line and "injected list" in line for line in struck)
    assert f"all {CHECKS} checks held" in r.stdout
    if "Declares" in design:  # what it declares is what its code does, in each fault-free run
        for held in ("setting: the worker's own tenant code sets the declared tenant_setting: it sets "
                     "app.current_tenant, as declared",
                     "lease: a declared lease_seconds gives seconds where the harness asks for it: 0.2 s on "
                     "the run's view",
                     "finish-time: a success dated on the database clock is after its body's last statement: "
                     "3 dated successes, each after its body's last statement"):
            assert sum(held in line for line in lines) == len(check.FAULT_FREE_WORKERS), r.stdout
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


def test_a_design_that_declares_wrong_what_its_code_does_fails_naming_each_check_and_its_fix(tmp_path):
    """Issue 46's three mistakes, each of which gave false verdicts with check-design passing: the
    tenant code sets app.current_tenant and no tenant_setting is declared; lease_seconds returns a value
    set in run_worker (None in the supervisor's process); the finish, in the job's transaction, is
    dated now()."""
    r = run_cli("check-design", f"{OWN}:Forgets", "--time-scale", "0.2", "-q", timeout=120, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    bad = [line for line in _check_lines(r.stdout) if line.startswith("FAILED")]
    failed = {
        "setting": "the worker's own code sets app.current_tenant (`select set_config('app.current_tenant', "
                   "%s, true)`), never app.tenant, the tenant_setting the harness watches",
        "lease": "forgets's lease_seconds returned None where the harness asks for it (the run's view, after "
                 "for_run): horizon is not judged; fix: return the real seconds",
        "finish-time": "ms before its body's last statement",
    }
    fixes = {"setting": "fix: declare tenant_setting = 'app.current_tenant' on the design class",
             "lease": "self.lease is the schedule's lease on the run's view",
             "finish-time": "fix: date the finish with clock_timestamp()"}
    for name, text in failed.items():
        mine = [line for line in bad if f": {name}: " in line]
        assert len(mine) == len(check.FAULT_FREE_WORKERS), r.stdout  # each fault-free run
        assert all(text in line and fixes[name] in line for line in mine), r.stdout
    # nothing else fails: the harness observes it; only what it declares is wrong
    assert len(bad) == DECLARED * len(check.FAULT_FREE_WORKERS), r.stdout
    assert (f"{len(bad)} of {CHECKS} checks FAILED: forgets declares what its code does not (setting, "
            "lease, finish-time); fix it as each line says before searching it, or its verdicts are false"
            in r.stdout), r.stdout


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
