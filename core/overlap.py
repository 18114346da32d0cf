"""How many job bodies ran at once: a figure of a history, not a verdict.

From the executions :meth:`~core.history.History.executions` derives (each from its ``started`` record to
its end: its terminal record, its process's death, or the end of the run), the most that were alive at the
same moment -- in one worker process (its identity: ``w1.0`` and its restart ``w1.1`` are two) and over the
whole run. A hosted library runs at its own concurrency (``workers/design.py``: ``concurrency``); this is
what it did. An execution that ends at the moment another starts does not overlap it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .history import Execution, History


@dataclass(frozen=True)
class AtOnce:
    """The most executions alive at once in one run: over the run, and per worker identity."""

    run: int = 0
    workers: dict[str, int] = field(default_factory=dict)

    @property
    def worker(self) -> int:
        """The most at once in any one worker."""
        return max(self.workers.values(), default=0)

    def to_dict(self) -> dict[str, object]:
        return {"run": self.run, "worker": self.worker, "workers": dict(sorted(self.workers.items()))}


def most_at_once(executions: Iterable[Execution]) -> int:
    """The most of *executions* alive at the same moment (an end at t before a start at t)."""
    edges = sorted(edge for ex in executions
                   for edge in ((ex.start, 1), (ex.end if ex.end is not None else ex.start, -1)))
    most = alive = 0
    for _, step in edges:  # (t, -1) sorts before (t, 1): what ends at t is gone when the next starts
        alive += step
        most = max(most, alive)
    return most


def bodies_at_once(h: History) -> AtOnce:
    """The most bodies alive at once in *h*, over the run and per worker."""
    executions = h.executions()
    by_worker: dict[str, list[Execution]] = {}
    for ex in executions:
        by_worker.setdefault(ex.worker, []).append(ex)
    return AtOnce(most_at_once(executions), {w: most_at_once(xs) for w, xs in by_worker.items()})


def summary(histories: Iterable[History]) -> dict[str, int]:
    """Over several runs (a search's): ``runs``, and the most bodies at once in one ``worker`` and in one
    ``run`` of any of them (empty: no run)."""
    figures = [bodies_at_once(h) for h in histories]
    if not figures:
        return {}
    return {"runs": len(figures), "worker": max(f.worker for f in figures),
            "run": max(f.run for f in figures)}

