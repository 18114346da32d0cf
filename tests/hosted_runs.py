"""What the hosted libraries' tests share: one run of a schedule on a library, its verdicts, and
whether the Node runtime the contract's Node client needs is here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pg_job_chaos import properties
from pg_job_chaos.core.events import FaultStep, WorkerExitReason
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule

NODE_DIR = Path(__file__).resolve().parents[1] / "workers" / "clients" / "node"


def run_hosted(runner, design: str, scale: float, jobs, **kw):
    """Run *jobs* on *design* (two workers unless *kw* says otherwise): the history and its verdicts."""
    h = runner.run(Schedule(jobs=tuple(jobs), design=design, time_scale=scale, **{"workers": 2, **kw}))
    return h, properties.check(h)


def violated(results) -> set[str]:
    return {n for n, r in results.items() if r.status == "violated"}


def fault_free_every_job_done_once(runner, design: str, scale: float, jobs: int = 8):
    """*jobs* short jobs of as many tenants on *design*, no fault: the run ends quiescent, every job done
    in one attempt with one committed row, and no property violated. The history and verdicts, for
    what a library's own test adds."""
    h, r = run_hosted(runner, design, scale,
                      [JobSpec(i, tenant=i, duration=0.01) for i in range(1, jobs + 1)])
    assert h.ended_by == "quiescent"
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)] * jobs
    assert sorted(x["job_id"] for x in h.runs) == list(range(1, jobs + 1))
    # horizon aside: its limit is half a lease (0.5 s at these scales), which one short transaction of a
    # worker starved beside busy loops outlives -- a real hold, but the machine's (docs/internals.md)
    assert violated(r) - {"horizon"} == set(), {n: x.evidence for n, x in r.items() if x.status == "violated"}
    return h, r


def deploy_finishes_the_job_in_hand(runner, design: str, scale: float, duration: float = 0.5):
    """SIGTERM mid-work (a rolling deploy) on job 1 of four (*duration* article seconds of work: well
    within the system's own timeout, whose end would retry it): the client's handler makes it take no more
    jobs and the system's own stop waits for the job in hand, which finishes and is completed once; the
    worker exits by itself within the grace (30 s, scaled), no SIGKILL, and its replacement runs the rest.
    The history and verdicts, for what a library's own test adds."""
    jobs = [JobSpec(1, tenant=1, duration=duration), *(JobSpec(i, tenant=i) for i in (2, 3, 4))]
    h, r = run_hosted(runner, design, scale, jobs, dequeues=30,
                      events=(Event("deploy", 1, point="mid-work", variant="rolling"),))
    (deploy,) = [i for i in h.injected if i["fault"] == FaultStep.DEPLOY]
    old = deploy["worker"]
    (gone,) = [x for x in h.exits if x.worker == old]
    assert gone.outcome == WorkerExitReason.GRACEFUL and not gone.by_harness, gone
    assert not [i for i in h.injected if i["fault"] == FaultStep.GRACE_KILL]
    assert [(e.worker, e.outcome) for e in h.executions() if e.job == 1] == [(old, "ok")]
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)] * 4
    assert r["graceful-completes"].status == "held", r["graceful-completes"].evidence
    return h, r


def crash_after_commit_kept_once(h, r) -> None:
    """The transaction path under a crash at ``after-insert`` (one worker): the finish committed with the
    body's row, so job 1 is done in its one execution -- the crashed one, on w1.0 -- with one row, and the
    single-commit, at-most-once-effects and done-means-committed properties held."""
    assert [(j["status"], j["attempts"]) for j in h.jobs] == [("done", 1)]
    (only,) = h.executions()
    assert only.worker == "w1.0" and [f["point"] for f in only.faults] == ["after-insert"]
    assert sorted((x["worker"], x["attempt"]) for x in h.runs) == [("w1.0", 1)]
    for name in ("single-commit", "at-most-once-effects", "done-means-committed"):
        assert r[name].status == "held", (name, r[name].evidence)


def node_missing() -> str | None:
    """Why the Node client cannot run here, or None."""
    node = shutil.which("node")
    if node is None:
        return "no node on PATH (the Node client needs Node >= 20)"
    out = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    major = int(out.strip().lstrip("v").split(".")[0])
    if major < 20:
        return f"node {major} on PATH: the Node client needs Node >= 20"
    if not (NODE_DIR / "node_modules" / "pg").is_dir():
        return f"the Node client's packages are not installed: npm ci --prefix {NODE_DIR}"
    return None
