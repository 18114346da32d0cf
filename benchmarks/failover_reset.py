"""The replicated back end's costs: a promotion (the primary's stop to a new read-write primary) and
the reset after it (``Pair.settle``: pg_rewind of the old primary, its start as the standby, catch-up),
over N runs of one lagging failover each (lease-heartbeat, two jobs). Prints the medians and ranges.

    python benchmarks/failover_reset.py --runs 15 [--replica sync]
"""

from __future__ import annotations

import argparse
import statistics
import time

from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.harness.postgres import ServerSpec, provision
from pg_job_chaos.harness.runner import Runner


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--replica", choices=("async", "sync"), default="async")
    args = p.parse_args()
    t = time.monotonic()
    with provision(ServerSpec(replica=args.replica)) as db, Runner(db) as runner:
        print(f"pair started in {time.monotonic() - t:.2f} s")
        schedule = Schedule(jobs=(JobSpec(1), JobSpec(2)), design="lease-heartbeat", time_scale=0.3,
                            events=(Event("failover", 1, point="mid-work"),))
        for _ in range(args.runs):
            runner.run(schedule)
        db.replica.settle()  # the last run's reset
        pair = db.replica
        for what, xs in (("promotion", pair.promotions), ("reset after a promotion", pair.resets)):
            print(f"{what}: median {statistics.median(xs):.3f} s, {min(xs):.3f}-{max(xs):.3f} s "
                  f"over {len(xs)}")


if __name__ == "__main__":
    main()
