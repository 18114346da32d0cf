"""``python run.py bench --libraries``: the hosted queue libraries beside ``lease-heartbeat``.

* per-job cost of a fault-free run (20 jobs, 2 workers), the libraries and ``lease-heartbeat``
  alternating in the same bench run, at one time scale (the largest any of them needs);
* time to the first counterexample under ``crash`` and under ``pause`` (seed 1), what it violated,
  and how small it shrank.

Only the libraries that import are measured; the others are named as skipped.
"""

from __future__ import annotations

import statistics

from ...core.errors import UsageError
from ...core.schedule import JobSpec, Schedule
from ...faults import parse_faults
from ...workers import LIBRARIES, load_design
from .. import scales
from ..engine.search import search

BASELINE = "lease-heartbeat"
JOBS, WORKERS, REPEATS = 20, 2, 3


def installed(out) -> list:
    """The hosted libraries that import here, as design objects; the rest are named as skipped."""
    found = []
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
    starts = [r["t"] for r in h.records if r.get("event") == "started"]
    ends = [r["t"] for r in h.records if r.get("event") == "finished"]
    if len(ends) < JOBS:
        return float("nan")
    return (max(ends) - min(starts)) / JOBS


def figures(runner, out, *, examples: int, quick: bool) -> None:
    print("\nhosted libraries (bench --libraries):", file=out)
    libs = installed(out)
    if not libs:
        return
    scale = max([scales.BENCH] + [d.min_time_scale or 0.0 for d in libs])
    names = [BASELINE] + [d.name for d in libs]
    costs: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(1 if quick else REPEATS):  # alternate: this machine is noisy
        for n in names:
            costs[n].append(per_job(runner, n, scale))
    base = statistics.median(costs[BASELINE])
    print(f"  per fault-free job ({JOBS} jobs, {WORKERS} workers, time scale {scale:g}, median of "
          f"{len(costs[BASELINE])}, alternating):", file=out)
    for n in names:
        m = statistics.median(costs[n])
        print(f"    {n:<16} {m * 1000:8.2f} ms per job ({m / base:.2f}x {BASELINE})", file=out)
    if quick:
        return
    print(f"  time to the first counterexample (seed 1, {examples} examples, time scale {scale:g}):", file=out)
    for d in libs:
        for fault in ("crash", "pause"):
            res = search(runner.run, faults=parse_faults(fault), design=d.name, tenant_mode="local",
                         examples=examples, seed=1, time_scale=scale)
            ce = res.counterexample
            first = f"{res.first_failure_seconds:.1f} s" if res.first_failure_seconds is not None else "none"
            what = (f"violates {', '.join(ce.violated)}, shrunk to {len(ce.schedule.jobs)} jobs"
                    if ce is not None else "every property held or could not decide")
            print(f"    {d.name:<14} {fault:<6} first counterexample {first:>8} of {res.seconds:6.1f} s "
                  f"({len(res.runs)} runs): {what}", file=out)
