"""What a deploy whose grace is shorter than the job in hand costs each queue (issue 47): job 1 works 0.8
article seconds (within every design's lease), jobs 2-4 keep the second worker busy, and a ``deploy`` of
each variant strikes at job 1's ``mid-work`` with a grace of 0.2 article seconds (``--grace``), so the
SIGKILL comes while the job is still running. ``--grace default`` gives the schedule no grace: the
system's documented one, else Kubernetes' 30 s (``core.schedule.DEFAULT_GRACE``).

Per run, one line: how it ended and in how long; whether the grace ran out (the SIGKILL) and the
replacement's start; each job's final status and attempts; the jobs run more than once, the jobs stuck
(neither done nor dead when the run ended), the jobs that ended dead; the time from the SIGKILL (else
the SIGTERM) to job 1's next execution; and the properties not held. A design is run at no less than its
``min_time_scale``.

    python benchmarks/deploy_cost.py [--design NAME ...] [--variant V ...] [--grace 0.2|default]
                                     [--time-scale 0.5] [--runs 1]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from pg_job_chaos.core.events import FaultStep
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule, Timing
from pg_job_chaos.faults.supervisor import DEPLOY_VARIANTS
from pg_job_chaos.harness.postgres import provision
from pg_job_chaos.harness.runner import Runner
from pg_job_chaos.properties import HELD, check
from pg_job_chaos.workers.loading import LIBRARIES, OTHER_RUNTIMES, load_design

QUEUES = tuple(n for n in LIBRARIES if n != "contract")  # the hosted queues, every runtime


def _schedule(design: str, variant: str, grace: float | None, scale: float) -> Schedule:
    jobs = (JobSpec(1, duration=0.8), JobSpec(2), JobSpec(3), JobSpec(4))
    return Schedule(jobs=jobs, workers=2, design=design, time_scale=scale, max_attempts=3, dequeues=30,
                    events=(Event("deploy", 1, point="mid-work", variant=variant),),
                    timing=Timing(grace=grace))


def _line(h) -> str:
    steps = {s: [i for i in h.injected if i["fault"] == s] for s in
             (FaultStep.DEPLOY, FaultStep.GRACE_KILL, FaultStep.REPLACEMENT_STARTED)}
    counts = Counter(e.job for e in h.executions())
    final = {j["id"]: j for j in h.jobs}
    ended = " ".join(f"{j}:{r['status']}/{r.get('attempts')}" for j, r in sorted(final.items()))
    twice = sorted(j for j, n in counts.items() if n > 1)
    stuck = sorted(j for j, r in final.items() if r["status"] not in ("done", "dead"))
    dead = sorted(j for j, r in final.items() if r["status"] == "dead")
    struck = (steps[FaultStep.GRACE_KILL] or steps[FaultStep.DEPLOY] or [{"t": None}])[0]["t"]
    again = sorted(e.start for e in h.executions() if e.job == 1 and struck is not None and e.start > struck)
    recover = f"{again[0] - struck:.2f} s" if again else "-"
    bad = sorted(n for n, r in check(h).items() if r.status != HELD)
    killed = "SIGKILL after the grace" if steps[FaultStep.GRACE_KILL] else "exited within the grace"
    started = len(steps[FaultStep.REPLACEMENT_STARTED])
    return (f"{killed}; replacements {started}; jobs {ended}; run more than once {twice or 'none'}; "
            f"stuck {stuck or 'none'}; dead {dead or 'none'}; job 1 again after "
            f"{recover}; not held: {', '.join(bad) or 'none'}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--design", action="append",
                   help="a design to run (repeatable; default every hosted queue)")
    p.add_argument("--variant", action="append", choices=DEPLOY_VARIANTS)
    p.add_argument("--grace", default="0.2", help="article seconds, or 'default'")
    p.add_argument("--time-scale", type=float, default=0.5)
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    grace = None if args.grace == "default" else float(args.grace)
    with provision() as db, Runner(db) as runner:
        for design in args.design or QUEUES:
            handle = load_design(design)
            scale = max(args.time_scale, handle.min_time_scale or 0.0)
            for variant in args.variant or DEPLOY_VARIANTS:
                for _ in range(args.runs):
                    t = time.monotonic()
                    h = runner.run(_schedule(design, variant, grace, scale))
                    where = "contract" if design in OTHER_RUNTIMES else "in-process"
                    print(f"{design} ({where}, time scale {scale:g}, grace {args.grace}) {variant}: "
                          f"{h.ended_by} in {time.monotonic() - t:.1f} s; {_line(h)}", flush=True)


if __name__ == "__main__":
    main()
