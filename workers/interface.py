"""The design protocol and its small types, at the bottom of the designs: what the built-in designs
(``workers/builtin/``) and the hosting (``workers/hosted/``) implement and may import, below both of them
and below the handle that resolves a design (``workers/design.py``, whose module docstring says what
each member does and what each optional one defaults to).

- :class:`Design`: the members every design has (:data:`REQUIRED`);
- :data:`POOL`: a design's ``concurrency`` when it declares none;
- :class:`Origin`: where a design came from (set by ``load_design``, carried by the handle);
- :class:`~core.history.Clock`: the lease a design's runs are judged against (what its ``clock``
  member returns; it is recorded in the history, so it is defined in ``core``);
- :data:`Row`, :data:`Finishes`: a job's final state, what a library accepted per job.

Nothing here knows a design by name, nor any design kind: a kind states its own members.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol, runtime_checkable

import psycopg

from ..core.history import Clock
from ..core.schedule import JobSpec
from .body.context import WorkerContext

__all__ = ["POOL", "REQUIRED", "Clock", "Design", "Finishes", "Origin", "Row"]

REQUIRED = ("name", "default_restart_delay", "install", "enqueue", "run_worker", "pending", "final_states")

Row = dict[str, object]  # one job's final state, or one finish
Finishes = dict[int, dict[str, object]]  # what a library accepted, per job id

POOL = "pool"
"""A design's ``concurrency`` when it declares none: as many bodies at once as the schedule's
``pool_size``."""


class Origin(StrEnum):
    """Where a design came from, as :func:`~workers.loading.load_design` found it: its own code or
    the harness's. The harness decides by it, never by the design's name: only a built-in design's
    workers are forked ahead (``harness/supervisor/standby.py``) and its tables checked once; an error
    of a built-in's or a library adapter's on the harness's tables is a bug of the harness's, a
    plug-in's is a clash of the user's (``harness/runner.py``)."""

    BUILTIN = "builtin"  # one of the article's designs (workers/builtin/), by name
    LIBRARY = "library"  # a hosted library's adapter (adapters/) or the worker contract, by name or path
    PLUGIN = "plugin"  # a user's module:attr or path/to/file.py:attr, or a design built in a test

    @property
    def ours(self) -> bool:
        """The harness's own code (a built-in design or a library's adapter), not a user's."""
        return self is not Origin.PLUGIN


@runtime_checkable
class Design(Protocol):
    """The members every design has (``workers/design.py``'s module docstring says what each does)."""

    name: str
    default_restart_delay: float

    def install(self, conn: psycopg.Connection, *, worker_role: str) -> None: ...

    def enqueue(self, conn: psycopg.Connection, jobs: Iterable[JobSpec], *, max_attempts: int) -> None: ...

    def run_worker(self, ctx: WorkerContext) -> None: ...

    def pending(self, conn: psycopg.Connection) -> int: ...

    def final_states(self, conn: psycopg.Connection) -> list[Row]: ...
