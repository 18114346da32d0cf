"""Schedules as the orchestration layer reads them: the base layer's structure checks plus the
names only the layers above it know (the fault catalogue, the tenant modes)."""

from __future__ import annotations

from pathlib import Path

from ...core import schedule as base
from ...core.schedule import Schedule
from ...faults import check_schedule as check_faults
from ...workers import check_schedule as check_tenant_modes

VALIDATORS: tuple[base.Validator, ...] = (check_faults, check_tenant_modes)


def load(path: str | Path) -> Schedule:
    """A schedule file, fully checked; a :class:`~core.errors.UsageError` names the file and field."""
    return base.load(path, validators=VALIDATORS)

