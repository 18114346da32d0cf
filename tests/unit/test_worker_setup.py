"""A worker that fails before its context exists still leaves a ``worker-error`` record: the
supervisor names the failure instead of a bare "worker error" exit."""

from __future__ import annotations

import json
import os

from pg_job_chaos.core.execlog import path_for
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.supervisor import process
from pg_job_chaos.workers import load_design
from pg_job_chaos.workers.body.execution import WorkerSpec


def test_a_setup_failure_is_recorded_in_the_workers_log(tmp_path):
    schedule = Schedule(design="lease", jobs=(JobSpec(id=1),), workers=1)
    spec = WorkerSpec("w1.0", schedule, "postgresql://127.0.0.1:1/none", tmp_path)
    not_the_parent = os.getpid() + 10**6  # die_with_parent sees another parent: setup fails at once
    proc = process._FORK.Process(target=process._entry,
                                 args=(spec, load_design("lease").for_run(schedule), (), not_the_parent))
    proc.start()
    proc.join(30)
    assert proc.exitcode == process.EXIT_WORKER_ERROR
    text = path_for(tmp_path, "w1.0").read_text()
    records = [json.loads(line) for line in text.splitlines()]
    errors = [r for r in records if r["event"] == "worker-error"]
    assert errors and "was gone before worker w1.0 started" in errors[0]["error"], text
    # the child's pid, not the parent's: core/execlog.py keeps it, refreshed at every fork
    assert errors[0]["pid"] == proc.pid != os.getpid()
