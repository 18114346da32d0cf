"""``python run.py bench --libraries``: the hosted queue libraries beside ``lease-heartbeat``.

* per-job cost of a fault-free run (20 jobs, 2 workers), each library and ``lease-heartbeat``
  alternating at the library's own lowest time scale;
* time to the first counterexample under ``raise``, ``crash``, ``overrun`` and ``pause`` (seed 1),
  what it violated, and how small it shrank;
* with ``--matrix``, one compare matrix of them all beside ``lease-heartbeat`` and ``lease-outbox``
  (``harness/bench/matrix.py``).

Only the libraries that import are measured; the others are named as skipped.
"""

from __future__ import annotations

import statistics

from ...core.errors import UsageError
from ...core.events import LogEvent
from ...core.schedule import JobSpec, Schedule
from ...faults import parse_faults
from ...workers import LIBRARIES, DesignHandle, load_design
from .. import scales
from ..engine.search import search

BASELINE = "lease-heartbeat"
FAULT_CLASSES = ("raise", "crash", "overrun", "pause")  # one fault of each class the hosted tests cover
JOBS = 20
WORKERS = 2
REPEATS = 3


def installed(out) -> list[DesignHandle]:
    """The hosted libraries that import here, each built once (its handle); the rest are named as
    skipped."""
    found: list[DesignHandle] = []
    for name in LIBRARIES:
        try:
            found.append(load_design(name))
        except UsageError as exc:
            print(f"  {name}: skipped ({exc})", file=out)
    return found


def per_job(runner, design: str, scale: float) -> float:
    """Seconds per job of one fault-free run: first ``started`` to last ``finished``, over the jobs."""
    sched = Schedule(jobs=tuple(JobSpec(i, tenant=(i % 100) + 1, duration=0.0) for i in range(1, JOBS + 1)),
                     workers=WORKERS, design=design, time_scale=scale)
    h = runner.run(sched)
    starts = [r["t"] for r in h.records if r.get("event") == LogEvent.STARTED]
    ends = [r["t"] for r in h.records if r.get("event") == LogEvent.FINISHED]
    if len(ends) < JOBS:
        return float("nan")
    return (max(ends) - min(starts)) / JOBS


def figures(runner, libraries: list[DesignHandle], out, *, examples: int, quick: bool) -> None:
    """Per library, at the lowest time scale it allows (never below :data:`scales.BENCH`): its cost per
    fault-free job beside ``lease-heartbeat`` at the same scale (alternating: this machine is noisy),
    then, unless *quick*, the time to its first counterexample under each fault class."""
    print("\nhosted libraries (bench --libraries):", file=out)
    libs = sorted(libraries, key=lambda d: d.min_time_scale or 0.0)  # the quick ones first
    for d in libs:
        scale = max(scales.BENCH, d.min_time_scale or 0.0)
        costs: dict[str, list[float]] = {BASELINE: [], d.spec: []}
        for _ in range(1 if quick else REPEATS):
            for n in costs:
                costs[n].append(per_job(runner, n, scale))
        base = statistics.median(costs[BASELINE])
        own = statistics.median(costs[d.spec])
        print(f"  {d.name} at time scale {scale:g}: {own * 1000:.2f} ms per fault-free job, {BASELINE} "
              f"{base * 1000:.2f} ms ({own / base:.2f}x; {JOBS} jobs, {WORKERS} workers, median of "
              f"{len(costs[BASELINE])})", file=out, flush=True)
        if quick:
            continue
        for fault in FAULT_CLASSES:
            res = search(runner.run, faults=parse_faults(fault), design=d, tenant_mode="local",
                         examples=examples, seed=1, time_scale=scale)
            ce = res.counterexample
            first = f"{res.first_failure_seconds:.1f} s" if res.first_failure_seconds is not None else "none"
            what = (f"violates {', '.join(ce.violated)}, shrunk to {len(ce.schedule.jobs)} jobs"
                    if ce is not None else "every property held or could not decide")
            print(f"    {fault:<8} first counterexample {first:>8} of {res.seconds:6.1f} s "
                  f"({len(res.runs)} runs): {what}", file=out, flush=True)
