"""The flat modules' old names (before workers/ was laid out by concept) still import, as the same
module object, with a DeprecationWarning naming the new place (workers/moved.py)."""

from __future__ import annotations

import importlib
import sys

import pytest

from pg_job_chaos.workers import moved


@pytest.mark.parametrize("old", sorted(moved.MOVED))
def test_an_old_name_is_the_new_module_with_a_warning(old):
    new = importlib.import_module(f"pg_job_chaos.workers.{moved.MOVED[old]}")
    sys.modules.pop(f"pg_job_chaos.workers.{old}", None)
    with pytest.warns(DeprecationWarning, match=f"moved to pg_job_chaos.workers.{moved.MOVED[old]}"):
        alias = importlib.import_module(f"pg_job_chaos.workers.{old}")
    assert alias is new
    assert new.__name__ == f"pg_job_chaos.workers.{moved.MOVED[old]}"  # the real module's name untouched


def test_every_new_place_exists_and_other_names_are_not_found():
    for new in moved.MOVED.values():
        importlib.import_module(f"pg_job_chaos.workers.{new}")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pg_job_chaos.workers.no_such_module")


def test_the_old_spelling_of_a_design_spec_loads_the_same_class():
    from pg_job_chaos.workers import load_design
    from pg_job_chaos.workers.builtin.heartbeat import LeaseHeartbeat

    sys.modules.pop("pg_job_chaos.workers.heartbeat", None)
    with pytest.warns(DeprecationWarning):
        handle = load_design("pg_job_chaos.workers.heartbeat:LeaseHeartbeat")
    assert handle.name == "lease-heartbeat"
    assert isinstance(handle.design, LeaseHeartbeat)
