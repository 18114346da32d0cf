"""Where a fault-free job's time goes: the bare psycopg loop against the lease design, part by part.

    python benchmarks/job_cost.py              # 5 rounds of 500 jobs
    python benchmarks/job_cost.py --rounds 9 --jobs 300

``run.py bench`` prints the harness against the bare loop (issue 36: goal <= 1.10x a job); this says
which part of the harness the difference is, in the client's CPU (steady across rounds) and the wall
clock (noisy on 2 vCPUs: where the scheduler puts client and backend moves it by +-20%). Each round
runs, alternating, on one embedded server, the same statements for the same jobs:

* ``bare``: ``harness/bench/cost.bare_loop``, one connection, no pool;
* ``in-process``: the design's own loop in this process (``run_worker``: its pool, its body), neither
  its records (``ExecLog.write`` a no-op) nor its statement points (``workers/body/statements.py`` not
  installed); then with the records; then with the statement points; then with both;
* ``harness``: ``Runner.run``: a forked worker (a standby's), the supervisor beside it (its wake-ups,
  its ``pg_stat_activity`` samples, the next run's standbys forked during it). Its CPU is the worker's
  (from the reaped children's rusage: its start, and any standby ended untaken, included).

Per job: first ``started`` to last ``finished`` over jobs - 1 for the design's legs (the bare loop:
its whole loop over jobs). A figure, not a test. Hazard: the in-process legs patch psycopg's
``Cursor.execute`` (what ``statements.install`` wraps) and restore it; run nothing else in this process.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import psycopg

from pg_job_chaos.core import execlog
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness import scales
from pg_job_chaos.harness.bench import cost
from pg_job_chaos.harness.postgres import provision
from pg_job_chaos.harness.runner import Runner
from pg_job_chaos.harness.supervisor.process import client_timeouts
from pg_job_chaos.workers import load_design
from pg_job_chaos.workers.body import statements

LEGS = ("bare", "in-process", "+ records", "+ statement points", "+ both", "harness")
_CMD_BASE = psycopg.Connection.__mro__[1]  # where statements.install wraps _exec_command
_ORIGINAL = ({(c, n): getattr(c, n) for c in (psycopg.Cursor, psycopg.AsyncCursor)
              for n in ("execute", "executemany")}, _CMD_BASE._exec_command, execlog.ExecLog.write)


def _restore() -> None:
    methods, command, write = _ORIGINAL
    for (cls, name), method in methods.items():
        setattr(cls, name, method)
    _CMD_BASE._exec_command = command
    execlog.ExecLog.write = write
    statements._ctx = None  # noqa: SLF001 - what install set


def _in_process(runner, database, sched: Schedule, *, records: bool, points: bool) -> tuple[float, float]:
    sched = sched.replace(dequeues=len(sched.jobs))
    dsn = client_timeouts(database.worker_dsn)  # as the harness's workers connect
    with cost.in_process(runner, load_design("lease"), sched, dsn, identity="w1.0") as (run, ctx):
        ctx.open_pool()
        times: list[dict] = []
        try:
            if points:
                statements.install(ctx)
            if not records:  # only the two records the figure is read from, kept in memory
                def write(self, event, **fields):
                    if event in ("started", "finished"):
                        times.append({"event": event, "t": time.monotonic()})
                execlog.ExecLog.write = write
            c0 = time.process_time()
            run.run_worker(ctx)
            cpu = (time.process_time() - c0) / len(sched.jobs)
        finally:
            _restore()
        return cost.per_job(cost.records(ctx) if records else times), cpu


def _leg(leg: str, runner, database, sched: Schedule) -> tuple[float, float]:
    """(wall seconds, client CPU seconds) per job of one leg."""
    if leg == "bare":
        runner.prepare(sched)
        c0 = time.process_time()
        wall = cost.bare_loop(database.worker_dsn, len(sched.jobs), sched.seconds(sched.timing.lease))
        return wall, (time.process_time() - c0) / len(sched.jobs)
    if leg == "harness":
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        h = runner.run(sched)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime
        return cost.per_job(h.records), cpu / len(sched.jobs)
    return _in_process(runner, database, sched, records=leg in ("+ records", "+ both"),
                       points=leg in ("+ statement points", "+ both"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=500)
    args = ap.parse_args()
    wall: dict[str, list[float]] = {leg: [] for leg in LEGS}
    cpu: dict[str, list[float]] = {leg: [] for leg in LEGS}
    with provision("local") as database, Runner(database) as runner:
        sched = Schedule(jobs=tuple(JobSpec(i, tenant=(i % 100) + 1, duration=0.0)
                                    for i in range(1, args.jobs + 1)),
                         workers=1, design="lease", time_scale=scales.BENCH)
        runner.run(sched)  # arms the standby the first harness leg takes
        for _ in range(args.rounds):
            for leg in LEGS:
                w, c = _leg(leg, runner, database, sched)
                wall[leg].append(w)
                cpu[leg].append(c)
    bare_wall, bare_cpu = statistics.median(wall["bare"]), statistics.median(cpu["bare"])
    print(f"per fault-free job, lease, {args.jobs} jobs, 1 worker, time scale {scales.BENCH:g}; "
          f"median of {args.rounds} alternating rounds (ms):")
    for leg in LEGS:
        w, c = statistics.median(wall[leg]), statistics.median(cpu[leg])
        print(f"  {leg:<20} wall {w * 1000:6.3f} ({w / bare_wall:4.2f}x)   client CPU {c * 1000:6.3f} "
              f"({c / bare_cpu:4.2f}x, +{(c - bare_cpu) * 1000:5.3f})   wall of each round: "
              + ", ".join(f"{x * 1000:.2f}" for x in wall[leg]))


if __name__ == "__main__":
    main()
