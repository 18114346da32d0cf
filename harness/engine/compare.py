"""Compare by search: each design searched with the same seed and budget, then every design's
counterexamples replayed on every other design, so a cell of the matrix is decided by the schedule
that shows it -- not by whatever a sample happened to draw.

:class:`Comparison` keeps, per design, the aggregated verdicts and, per violated property, which
schedule decided it (an index into :attr:`Comparison.schedules`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...core.schedule import Schedule
from ...properties import PROPERTIES, VIOLATED, aggregate, check, violated_names
from ...workers.design import DesignHandle
from .outcome import Run, SearchOutcome
from .search import RunOne, search


@dataclass
class Deciding:
    """A schedule that decided a cell: where it came from, and the schedule itself."""

    origin: str  # "lease-fenced's counterexample for single-commit"
    schedule: Schedule
    run: Run  # the run of its own design's search that found it


@dataclass
class Comparison:
    designs: list[str]
    outcomes: dict[str, SearchOutcome] = field(default_factory=dict)
    results: dict[str, dict] = field(default_factory=dict)
    # design -> property -> schedule index
    decided_by: dict[str, dict[str, int]] = field(default_factory=dict)
    schedules: list[Deciding] = field(default_factory=list)


def compare(run: RunOne, *, designs: list[DesignHandle], faults, tenant_mode: str,
            examples: int, seed: int | None, time_scale: float, workers: int | None = None,
            budget: float | None = None, progress: Callable[[str], None] = lambda s: None,
            **search_options) -> Comparison:
    """Search every design (its handle, built once by the caller), then cross-replay the
    counterexamples (see the module's docstring)."""
    handles = {d.spec: d for d in designs}
    c = Comparison(list(handles))
    for d, handle in handles.items():
        progress(f"compare: searching {d}")
        c.outcomes[d] = search(run, faults=faults, design=handle, tenant_mode=tenant_mode, examples=examples,
                               seed=seed, time_scale=time_scale, workers=workers, budget=budget,
                               progress=progress, **search_options)
    # Every design's smallest schedule per violated property, once each.
    seen: dict[str, int] = {}
    for d in handles:
        out = c.outcomes[d]
        for name in PROPERTIES:
            smallest = out.smallest_for(name)
            if smallest is None:
                continue
            key = smallest.schedule.replace(design="").to_json()
            if key not in seen:
                seen[key] = len(c.schedules)
                c.schedules.append(Deciding(f"{d}'s counterexample for {name}", smallest.schedule, smallest))
    run_many = search_options.get("run_many")
    for d, handle in handles.items():
        runs: list[tuple[Run | _Replayed, int | None]] = [(r, None) for r in c.outcomes[d].runs]
        todo = [(i, x.schedule.replace(design=d, design_options=dict(handle.options)))
                for i, x in enumerate(c.schedules) if x.schedule.design != d]
        progress(f"compare: {len(todo)} counterexamples of other designs on {d}")
        histories = (run_many([s for _, s in todo]) if run_many and todo
                     else [run(s, design=handle) for _, s in todo])
        for (i, _), history in zip(todo, histories, strict=True):
            runs.append((_Replayed(check(history)), i))
        c.results[d] = aggregate([r.results for r, _ in runs])
        c.decided_by[d] = {}
        for name, res in c.results[d].items():
            if res.status != VIOLATED:
                continue
            own = c.outcomes[d].smallest_for(name)
            if own is not None:
                key = own.schedule.replace(design="").to_json()
                c.decided_by[d][name] = seen[key]
            else:
                c.decided_by[d][name] = next(i for r, i in runs if i is not None and name in r.violated)
    return c


@dataclass
class _Replayed:
    results: dict

    @property
    def violated(self) -> list[str]:
        return violated_names(self.results)
