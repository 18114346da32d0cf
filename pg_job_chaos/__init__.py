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

from pg_job_chaos.results import ChaosResult, ChaosViolation
from pg_job_chaos.strategy import schedules

__all__ = ["ChaosResult", "ChaosViolation", "schedules"]
