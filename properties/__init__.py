"""The invariants: pure functions of a :class:`~core.history.History`, one per guarantee.

:data:`PROPERTIES` maps each name to its check, in the order of the design's table
(``tenant-isolation`` ... ``no-stale-effect``); :func:`check` runs them on one history and
:func:`aggregate` composes the verdicts of many runs, worst first. Each check returns a
:class:`Result`: held, violated or unknown (it could not decide: never held), with a count, the
offending job ids and one line of evidence. Safety properties live in ``properties/checks.py``,
``properties/effects.py`` and (what a hosted library itself accepted) ``properties/library.py``,
liveness and resource properties in ``properties/health.py``, how tenants share the workers (the group
``fairness``) in ``properties/fairness.py`` and ``properties/share.py``, the Hypothesis strategies that
generate schedules in ``properties/strategies.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..core.errors import UsageError
from ..core.history import History
from . import checks, deploy, effects, failover, fairness, final, health, library, outcome, share, tenant  # noqa: F401 -- each registers its properties
from .core import (
    HELD,
    REGISTRY,
    UNKNOWN,
    VIOLATED,
    Result,
    aggregate,
    not_judged_names,
    undecided_names,
    violated_names,
    worst,
)
from .explain import explain

__all__ = ["GROUPS", "HELD", "OPT_IN", "PROPERTIES", "UNKNOWN", "VIOLATED", "Result", "aggregate", "applying",
           "check", "gate", "not_judged_names", "undecided_names", "violated_names", "worst"]

# Every property module registers its properties (``@decides(name, group=..., position=...)``) as it
# is imported: all of them are imported above, so the registry is complete here.
_REGISTERED = sorted(REGISTRY.values(), key=lambda p: p.position)

# Each name to its check, in the order of the design's table (``position``).
PROPERTIES: dict[str, Callable[[History], Result]] = {p.name: p.check for p in _REGISTERED}

# The groups --fail-on and --allow name (besides the properties themselves and "all"): each group's
# properties in PROPERTIES order, the groups in the order their first property comes.
GROUPS: dict[str, tuple[str, ...]] = {
    group: tuple(p.name for p in _REGISTERED if p.group == group)
    for group in dict.fromkeys(p.group for p in _REGISTERED)
}

# Groups judged and shown in every run but outside the default gate: a run fails on them only when the
# command asks (``--fail-on fairness``, ``all``, or ``--workload``, which declares what they judge).
OPT_IN: tuple[str, ...] = ("fairness",)


def _names(spec: str | Iterable[str], flag: str) -> list[str]:
    items = [x.strip() for x in (spec.split(",") if isinstance(spec, str) else spec) if x.strip()]
    out: list[str] = []
    for item in items:
        if item == "all":
            found = list(PROPERTIES)
        elif item in GROUPS:
            found = list(GROUPS[item])
        elif item in PROPERTIES:
            found = [item]
        else:
            raise UsageError(f"{flag} {item!r}: not a property or group; groups: all, {', '.join(GROUPS)}; "
                             f"properties: {', '.join(PROPERTIES)}")
        out += [n for n in found if n not in out]
    return out


def gate(fail_on: str | Iterable[str] | None = None,
         allow: str | Iterable[str] | None = None) -> tuple[str, ...]:
    """The properties whose violation fails a run: *fail_on* (names or groups, comma-separated; default
    every property outside the :data:`OPT_IN` groups) less *allow*,
    in :data:`PROPERTIES` order. Raises :class:`~core.errors.UsageError` for a name that
    is neither, and when nothing would be left to fail a run."""
    chosen = set(_names(fail_on, "--fail-on")) if fail_on else {
        n for n in PROPERTIES if not any(n in GROUPS.get(g, ()) for g in OPT_IN)}
    chosen -= set(_names(allow, "--allow")) if allow else set()
    if not chosen:
        raise UsageError("--fail-on/--allow leave no property that can fail the run")
    return tuple(n for n in PROPERTIES if n in chosen)


def applying(*, replica: bool, workload: bool, capped: bool = False, deployed: bool = False) -> list[str]:
    """The properties that apply to a run, in order: a failover property only on the replicated back end
    (properties/failover.py), a deploy property only when the schedule has a deploy (*deployed*,
    properties/deploy.py), the ``fairness`` group only under a declared tenant workload -- but
    ``tenant-cap`` also in a run whose design declares a cap (*capped*, properties/share.py)."""
    return [n for n in PROPERTIES if (replica or n not in failover.REPLICA_ONLY)
            and (deployed or n not in deploy.DEPLOY_ONLY)
            and (workload or n not in GROUPS.get("fairness", ()) or (capped and n in share.WHERE_CAPPED))]


def check(history: History, names: Iterable[str] | None = None) -> dict[str, Result]:
    """Run the named properties (all by default) on *history*, in the given order.

    A property that raises, or returns something other than a :class:`Result`, yields
    ``unknown`` with "could not decide: <ExcType>: <msg>" -- never held. Raises
    :class:`~core.errors.UsageError` for a name that is not a property, listing the known ones.
    """
    if names is None:
        names = applying(replica=failover.replicated(history), workload=history.schedule.workload is not None,
                         capped=history.tenant_cap is not None, deployed=deploy.deployed(history))
    names = [names] if isinstance(names, str) else list(names)
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
    return explain(history, out)
