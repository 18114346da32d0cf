"""Each design through one ``demote-in-place`` failover (the standby promoted, the old primary left up
read-only with its sessions open) on an async and a sync pair: three jobs (the first works 0.3 article
seconds), two workers, the flip at job 1's ``mid-work`` -- as ``run.py experiment failover``'s runs.
The built-in designs by default; ``--design NAME`` (repeatable) for any other, a hosted queue run at no
less than its ``min_time_scale``. Per run, one line: how it ended, each job's final status and
attempts, the statements the servers refused ("... in a read-only transaction": the harness's body's
and the library's own, counted in both nodes' server logs over the run, split by command), a finish
acknowledged on the old node that the new primary lacks, the first execution after the flip, and the
properties not held. A design whose workers keep their sessions runs until the deadline.

    python benchmarks/failover_demote.py [--runs 1] [--time-scale 0.5] [--replica async|sync]
                                         [--design NAME ...]
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from pathlib import Path

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.harness.experiments.failover import DESIGNS, _one
from pg_job_chaos.harness.postgres import ServerSpec, provision
from pg_job_chaos.harness.runner import Runner
from pg_job_chaos.properties import HELD, check
from pg_job_chaos.workers.loading import load_design

READ_ONLY = "in a read-only transaction"
REFUSED = re.compile(r"ERROR:\s+cannot execute (.+?) in a read-only transaction")


def _log_sizes(root: Path) -> dict[Path, int]:
    """Each server log under the pair's directory (the primary's and its standby's) and its size now."""
    return {p: p.stat().st_size for p in root.rglob("postgres.log")}


def _refused_since(sizes: dict[Path, int], root: Path) -> Counter:
    """The read-only refusals the servers logged since *sizes* was taken, by command (a node's log
    started since then is read whole)."""
    out: Counter = Counter()
    for p in root.rglob("postgres.log"):
        with open(p, "rb") as f:
            f.seek(sizes.get(p, 0))
            for m in REFUSED.finditer(f.read().decode(errors="replace")):
                out[m.group(1)] += 1
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--time-scale", type=float, default=0.5)
    p.add_argument("--replica", choices=("async", "sync"), action="append")
    p.add_argument("--design", action="append", help="a design to run (repeatable; default the built-ins)")
    args = p.parse_args()
    designs = args.design or DESIGNS
    for mode in args.replica or ("async", "sync"):
        with provision(ServerSpec(replica=mode)) as db, Runner(db) as runner:
            root = db.replica.run_dir
            for design in designs:
                scale = max(args.time_scale, load_design(design).min_time_scale or 0.0)
                for _ in range(args.runs):
                    t = time.monotonic()
                    sizes = _log_sizes(root)
                    jobs = (JobSpec(1, duration=0.3), JobSpec(2), JobSpec(3))
                    flip = Event("failover", 1, point="mid-work", variant="demote-in-place")
                    h = runner.run(Schedule(jobs=jobs, workers=2, design=design, time_scale=scale,
                                            events=(flip,)))
                    seconds = time.monotonic() - t
                    one = _one(h)
                    by_command = _refused_since(sizes, root)
                    refused = sum(by_command.values())
                    body = sum(READ_ONLY in str(r.get("error") or "") for r in h.records)
                    final = {j["id"]: j for j in h.jobs}
                    acked = sorted({e.job for e in h.executions() if e.outcome == "ok"
                                    and (final.get(e.job) or {}).get("status") != "done"})
                    ended = " ".join(f"{j}:{r['status']}/{r.get('attempts')}"
                                     for j, r in sorted(final.items()))
                    bad = sorted(n for n, r in check(h).items() if r.status != HELD)
                    recover = f"{one['recover']:.2f} s" if one["recover"] is not None else "-"
                    commands = ", ".join(f"{c} {n}" for c, n in by_command.most_common())
                    print(f"{mode} {design} (time scale {scale:g}): {h.ended_by} in {seconds:.1f} s; jobs "
                          f"{ended}; refused {refused} ({commands or '-'}; the body's {body}); "
                          f"acknowledged finish not on the new primary: {acked or 'none'}; first execution "
                          f"after the flip {recover}; not held: {', '.join(bad) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
