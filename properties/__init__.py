"""The invariants: pure functions of a :class:`~core.history.History`, one per guarantee.

:data:`PROPERTIES` maps each name to its check, in the order of the design's table
(``tenant-isolation`` ... ``no-stale-effect``); :func:`check` runs them on one history and
:func:`aggregate` composes the verdicts of many runs, worst first. Each check returns a
:class:`Result`: held, violated or unknown (it could not decide: never held), with a count, the
offending job ids and one line of evidence. Safety properties live in ``properties/checks.py`` and
``properties/effects.py``,
liveness and resource properties in ``properties/health.py``, the Hypothesis strategies that
generate schedules in ``properties/strategies.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..core.errors import UsageError
from ..core.history import History
from . import checks, effects, health
from .core import HELD, UNKNOWN, VIOLATED, Result, aggregate, undecided_names, violated_names, worst

__all__ = ["HELD", "PROPERTIES", "UNKNOWN", "VIOLATED", "Result", "aggregate", "check", "undecided_names",
           "violated_names", "worst"]

PROPERTIES: dict[str, Callable[[History], Result]] = {
    "tenant-isolation": checks.tenant_isolation,
    "single-commit": checks.single_commit,
    "no-overlap": checks.no_overlap,
    "at-most-once-effects": effects.at_most_once_effects,
    "attempts-counted": checks.attempts_counted,
    "bounded-attempts": checks.bounded_attempts,
    "progress": health.progress,
    "terminal-states": health.terminal_states,
    "bounded-blast-radius": health.bounded_blast_radius,
    "horizon": health.horizon,
    "pool-hygiene": health.pool_hygiene,
    "no-stale-effect": effects.no_stale_effect,
}


def check(history: History, names: Iterable[str] | None = None) -> dict[str, Result]:
    """Run the named properties (all by default) on *history*, in the given order.

    A property that raises, or returns something other than a :class:`Result`, yields
    ``unknown`` with "could not decide: <ExcType>: <msg>" -- never held. Raises
    :class:`~core.errors.UsageError` for a name that is not a property, listing the known ones.
    """
    names = list(PROPERTIES) if names is None else [names] if isinstance(names, str) else list(names)
    unknown_names = [n for n in names if n not in PROPERTIES]
    if unknown_names:
        raise UsageError(f"unknown property {unknown_names[0]!r}; properties: {', '.join(PROPERTIES)}")
    out = {}
    for name in names:
        try:
            result = PROPERTIES[name](history)
            if not isinstance(result, Result):
                raise TypeError(f"property {name} returned {type(result).__name__}, not a Result")
        except Exception as exc:  # a property that cannot decide says unknown, never held
            msg = " ".join(str(exc).split())
            result = Result(name, UNKNOWN, evidence=f"could not decide: {type(exc).__name__}: {msg}")
        out[name] = result
    return out
