"""What a supervisor's run returns (``loop.py``): the runner makes a history of it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.events import EndedBy
from ...core.history import WorkerExit


@dataclass
class SupervisorResult:
    records: list[dict]
    exits: list[WorkerExit]
    injected: list[dict]
    samples: list[dict]
    ended_by: EndedBy
    t0: float
    t1: float
    notes: list[str] = field(default_factory=list)
    # monotonic times of the run's steps, for run.py bench --profile: admin (session open), spawned
    # (every worker forked), ended (the loop decided), shut (workers gone, last records read)
    steps: dict[str, float] = field(default_factory=dict)
    meanwhile: object = None  # what run()'s meanwhile returned (the runner's reads of the final tables)
