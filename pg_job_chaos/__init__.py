"""pg-job-chaos for your own tests: the schedule strategy, and the results the pytest plugin returns.

Installing pg-job-chaos registers a pytest plugin (:mod:`pg_job_chaos.plugin`, entry point
``pytest11``) with the fixtures ``chaos_database`` (a throwaway PostgreSQL per test session),
``chaos_session`` (session-scoped: run schedules and searches) and ``chaos_run`` (the same, with
the test's ``@pytest.mark.chaos_config(...)`` defaults). Write property-based tests of your own::

    from hypothesis import given, settings
    from pg_job_chaos import schedules

    @settings(max_examples=5, deadline=None)
    @given(schedules(design="mydesign.py:Design", faults="crash"))
    def test_my_design_counts_attempts(chaos_session, schedule):
        chaos_session.run(schedule).assert_held("attempts-counted")

This package sits on top of the orchestration layer (``harness``); nothing below imports it.
"""

from __future__ import annotations

import importlib

__all__ = ["ChaosResult", "ChaosViolation", "schedules"]

# Hazard: pytest imports pg_job_chaos.plugin (so this package) in every session where pg-job-chaos
# is installed; the names below load on first use, so that a session which never asks for them
# does not pay for Hypothesis and the harness.
_HOME = {"ChaosResult": "pg_job_chaos.results", "ChaosViolation": "pg_job_chaos.results",
         "schedules": "pg_job_chaos.strategy"}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'pg_job_chaos' has no attribute {name!r}")
