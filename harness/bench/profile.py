"""Where a fault-free example's time goes, and how soon each planted bug is found: ``run.py bench``.

:func:`phases` splits one run into consecutive steps from the runner's and the supervisor's step times
(``Runner.steps``) and the workers' own execution-log records (monotonic clocks of one machine):

* ``prepare``: stamp, reset the queue, enqueue (``Runner.prepare``);
* ``admin``: the run directory, the supervisor's own session;
* ``fork``: the supervisor forks the workers -- or takes the standbys forked during the run before
  (``harness/supervisor/standby.py``) -- until the first one runs its own code;
* ``connect``: the first worker opens its pool (its first ``connect`` record; 0 for a standby's pool,
  opened ahead);
* ``first claim``: from there to the first ``started`` record;
* ``jobs``: first ``started`` to last ``finished`` (the schedule's own work);
* ``settle``: the last ``finished`` until the supervisor decides the run is over (quiescence);
* ``read``: killing the workers, then the final tables (jobs, runs, transitions, a hosted library's
  own), read while the kernel tears the workers down;
* ``shutdown``: waiting for the workers to be gone, reading their last records;
* ``history``: building the history.
"""

from __future__ import annotations

import statistics
import time

from ...core.events import LogEvent
from ...faults import parse_faults
from ..engine.search import search
from . import planted

PHASES = ("prepare", "admin", "fork", "connect", "first claim", "jobs", "settle", "read", "shutdown",
          "history")


def phases(steps: dict[str, float], records: list[dict], end: float) -> dict[str, float] | None:
    """Seconds per phase of one run (*end*: when ``Runner.run`` returned); None when the run lacks a
    step (no worker started a job: not a fault-free run)."""
    def first(event: str) -> float | None:
        ts = [r["t"] for r in records if r.get("event") == event]
        return min(ts) if ts else None

    finished = [r["t"] for r in records if r.get("event") == LogEvent.FINISHED]
    start = first(LogEvent.WORKER_START)
    connect = first(LogEvent.CONNECT)
    connected = max(start, connect) if start is not None and connect is not None else None
    points = [steps.get("begin"), steps.get("prepared"), steps.get("admin"), start,
              connected, first(LogEvent.STARTED), max(finished) if finished else None,
              steps.get("ended"), steps.get("read"), steps.get("shut"), end]
    if any(p is None for p in points):
        return None
    ts = [float(p) for p in points if p is not None]
    return {name: b - a for name, a, b in zip(PHASES, ts[:-1], ts[1:], strict=True)}


def timed_run(runner, schedule) -> tuple[object, dict[str, float] | None]:
    """``runner.run(schedule)`` and its phases."""
    h = runner.run(schedule)
    return h, phases(runner.steps, h.records, time.monotonic())


def print_phases(rows: list[dict[str, float]], out, what: str) -> None:
    """The median of each phase over *rows*, and its share of the median example."""
    if not rows:
        print(f"profile of {what}: no run had every step", file=out)
        return
    med = {k: statistics.median(r[k] for r in rows) for k in PHASES}
    total = sum(med.values())
    print(f"profile of {what} (median of {len(rows)} runs, ms; sum of medians {total * 1000:.1f} ms):",
          file=out)
    print("  " + ", ".join(f"{k} {v * 1000:.1f} ({100 * v / total:.0f}%)" for k, v in med.items()), file=out)


def first_counterexamples(runner, out, examples: int, scale: float) -> None:
    """Per planted bug, the default search (seed 1, *examples* examples) until the first run that
    violates the bug's named property: seconds of runs and how many runs, then the whole search's."""
    print(f"\ntime to first counterexample per planted bug (harness/bench/planted.py; {examples} examples, "
          f"seed 1, time scale {scale:g}):", file=out)
    for bug, faults, prop in planted.CASES:
        t0 = time.monotonic()
        res = search(runner.run, faults=parse_faults(faults), design=runner.handle(planted.spec(bug)),
                     tenant_mode="local", examples=examples, seed=1, time_scale=scale)
        whole = time.monotonic() - t0
        hit = next((i for i, r in enumerate(res.runs) if prop in r.violated), None)
        if hit is None:
            first = "NOT FOUND"
        else:
            first = f"{sum(r.seconds for r in res.runs[:hit + 1]):6.1f} s, run {hit + 1:3}"
        smallest = res.smallest_for(prop) if hit is not None else None
        size = len(smallest.schedule.jobs) if smallest is not None else "-"
        print(f"  {bug:<26} {faults or '-':<12} {prop:<22} first {first:>18}; whole search "
              f"{len(res.runs):3} runs {whole:6.1f} s, shrunk to {size} jobs", file=out)
