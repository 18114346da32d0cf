"""The schedule strategy with the command line's spelling: faults as ``"crash,overrun"``."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import strategies as st

from .faults.catalogue import parse_faults
from .properties import strategies


def schedules(*, design: str = "lease", faults: str | Iterable[str] = "", tenant_mode: str = "local",
              time_scale: float = 0.5, workers: int | None = None,
              max_jobs: int = strategies.MAX_JOBS, max_attempts: int = 3) -> st.SearchStrategy:
    """A Hypothesis strategy of :class:`~core.schedule.Schedule` s for *design* (a built-in name,
    ``package.module:attr`` or ``path/to/file.py:attr``) whose jobs and events carry only *faults*
    (``"crash,overrun"`` or a list of names; ``python run.py --list-faults``). Shrinks toward fewer
    jobs, fewer workers, fewer faults. Raises :class:`~core.errors.UsageError` for an unknown fault."""
    names = faults if isinstance(faults, str) else ",".join(faults)
    return strategies.schedules(faults=parse_faults(names), design=design, tenant_mode=tenant_mode,
                                time_scale=time_scale, workers=workers, max_jobs=max_jobs,
                                max_attempts=max_attempts)
