"""Each built-in design through one ``demote-in-place`` failover (the standby promoted, the old primary
left up read-only with its sessions open) on an async and a sync pair: three jobs (the first works 0.3
article seconds), two workers, the flip at job 1's ``mid-work`` -- as ``run.py experiment failover``'s
runs. Per run, one line: how it ended, each job's final status and attempts, the worker statements
the old node refused ("... in a read-only transaction"), a finish acknowledged on the old node that
the new primary lacks, the first execution after the flip, and the properties not held. A design
whose workers keep their sessions runs until the deadline (60 article seconds).

    python benchmarks/failover_demote.py [--runs 1] [--time-scale 0.5] [--replica async|sync]
"""

from __future__ import annotations

import argparse
import time

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.harness.experiments.failover import DESIGNS, _one
from pg_job_chaos.harness.postgres import ServerSpec, provision
from pg_job_chaos.harness.runner import Runner
from pg_job_chaos.properties import HELD, check

READ_ONLY = "in a read-only transaction"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--time-scale", type=float, default=0.5)
    p.add_argument("--replica", choices=("async", "sync"), action="append")
    args = p.parse_args()
    for mode in args.replica or ("async", "sync"):
        with provision(ServerSpec(replica=mode)) as db, Runner(db) as runner:
            for design in DESIGNS:
                for _ in range(args.runs):
                    t = time.monotonic()
                    jobs = (JobSpec(1, duration=0.3), JobSpec(2), JobSpec(3))
                    flip = Event("failover", 1, point="mid-work", variant="demote-in-place")
                    h = runner.run(Schedule(jobs=jobs, workers=2, design=design, time_scale=args.time_scale,
                                            events=(flip,)))
                    seconds = time.monotonic() - t
                    one = _one(h)
                    refused = sum(READ_ONLY in str(r.get("error") or "") for r in h.records)
                    final = {j["id"]: j for j in h.jobs}
                    acked = sorted({e.job for e in h.executions() if e.outcome == "ok"
                                    and (final.get(e.job) or {}).get("status") != "done"})
                    ended = " ".join(f"{j}:{r['status']}/{r.get('attempts')}"
                                     for j, r in sorted(final.items()))
                    bad = sorted(n for n, r in check(h).items() if r.status != HELD)
                    recover = f"{one['recover']:.2f} s" if one["recover"] is not None else "-"
                    print(f"{mode} {design}: {h.ended_by} in {seconds:.1f} s; jobs {ended}; "
                          f"refused {refused}; "
                          f"acknowledged finish not on the new primary: {acked or 'none'}; first execution "
                          f"after the flip {recover}; not held: {', '.join(bad) or 'none'}", flush=True)


if __name__ == "__main__":
    main()
