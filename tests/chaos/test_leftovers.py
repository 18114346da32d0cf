"""What a worker's ``multiprocessing`` leaves when its process group is SIGKILLed goes with the run
(``harness/supervisor/leftovers.py``): its named semaphores are unlinked by the resource tracker the
harness started outside the group, and its temp files are made in the run's temp directory. No PostgreSQL:
a stand-in harness (a subprocess) forks a stand-in worker in its own process group, as
``harness/supervisor/process.py`` does, and kills the group."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pg_job_chaos.harness.supervisor import leftovers

HARNESS = textwrap.dedent("""
    import json, multiprocessing, os, signal, sys, time
    from pg_job_chaos.harness.supervisor import leftovers

    run_dir, out = sys.argv[1], sys.argv[2]
    leftovers.share_resource_tracker()  # as Runner.__init__
    pid = os.fork()
    if pid == 0:  # the worker: its own group, a library's spawn-context lock and Manager
        os.setpgid(0, 0)
        leftovers.worker_tempdir(run_dir, "w1.0")
        spawn = multiprocessing.get_context("spawn")
        lock = spawn.Lock()
        manager = spawn.Manager()
        with open(out, "w") as f:
            json.dump({"semaphore": lock._semlock.name, "manager": str(manager.address)}, f)
        time.sleep(60)
        os._exit(0)
    for _ in range(600):  # the worker says what it made
        if os.path.exists(out) and os.path.getsize(out):
            break
        time.sleep(0.05)
    os.killpg(pid, signal.SIGKILL)  # a crash fault: the worker, its Manager and anything else in the group
    os.waitpid(pid, 0)
""")


def test_a_killed_workers_semaphores_are_unlinked_and_its_temp_files_are_the_runs(tmp_path):
    run_dir = tmp_path / "run"  # deep: pytest's tmp_path under xdist (a socket in here would not fit)
    run_dir.mkdir()
    out = tmp_path / "made.json"
    try:
        subprocess.run([sys.executable, "-c", HARNESS, str(run_dir), str(out)], check=True, timeout=120)
        made = json.loads(out.read_text())
        # the Manager's socket (and its pymp-* directory) is in the worker's temp directory, the run's,
        # which the runner removes with the run
        assert Path(made["manager"]).is_relative_to(leftovers.run_tempdir(run_dir) / "w1.0"), made
    finally:
        shutil.rmtree(leftovers.run_tempdir(run_dir), ignore_errors=True)
    # its semaphore: unlinked by the tracker once the last holder of its pipe (the stand-in harness) ended
    sem = Path("/dev/shm") / ("sem." + made["semaphore"].lstrip("/"))
    deadline = time.monotonic() + 30
    while sem.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not sem.exists(), f"{sem} left behind by a killed worker"


def test_without_the_shared_tracker_the_semaphore_would_stay(tmp_path):
    """The test above can fail: a worker whose tracker is in its own group (what a library starts
    when the harness has not) loses it to the same kill, and its semaphore stays -- removed here."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    out = tmp_path / "made.json"
    script = HARNESS.replace("leftovers.share_resource_tracker()", "pass")
    try:
        subprocess.run([sys.executable, "-c", script, str(run_dir), str(out)], check=True, timeout=120)
    finally:
        shutil.rmtree(leftovers.run_tempdir(run_dir), ignore_errors=True)
    sem = Path("/dev/shm") / ("sem." + json.loads(out.read_text())["semaphore"].lstrip("/"))
    try:
        assert sem.exists()  # its tracker died in the worker's group: nothing unlinks it
    finally:
        sem.unlink(missing_ok=True)


def _sleep_forever() -> None:
    time.sleep(600)


def test_a_slot_killed_mid_run_leaves_no_temp_directory_of_its_runs(tmp_path):
    """A slot (harness/slots.py) its parent kills mid-run never reaches its runner's cleanup: the parent
    removes its runs' temp directories, which are not under the slot's runs base."""
    import multiprocessing
    from types import SimpleNamespace

    from pg_job_chaos.harness.slots import Slots

    runs_base = tmp_path / "slot"
    run_dir = runs_base / "logs-1-abc"
    run_dir.mkdir(parents=True)
    tmp = leftovers.run_tempdir(run_dir)
    (tmp / "w1.0" / "pymp-x").mkdir(parents=True)
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    p = multiprocessing.get_context("fork").Process(target=_sleep_forever, daemon=True)
    p.start()
    try:
        Slots._stop(SimpleNamespace(_hurry=True), ours, p, runs_base)  # type: ignore[arg-type]
        assert p.exitcode is not None and not tmp.exists()
    finally:
        if p.is_alive():
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
