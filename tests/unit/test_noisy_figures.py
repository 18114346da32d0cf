"""The noisy-neighbour experiment's own figures (harness/experiments/noisy.py), on hand-made numbers."""

from __future__ import annotations

import pytest

from pg_job_chaos.harness.experiments.noisy import backlogged_jain, jain, percentile, schedule_jobs


def test_jain_is_one_when_equal_and_one_over_n_when_one_did_all():
    assert jain([5, 5, 5, 5]) == 1.0
    assert jain([8, 0, 0, 0]) == 0.25
    assert jain([2, 1]) == pytest.approx(9 / 10)
    assert jain([0, 0]) is None


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0], 99) == 3.0 and percentile([], 50) is None


def test_backlogged_window_ends_when_the_first_tenant_runs_dry():
    tenant_of = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2}
    # tenant 1's jobs start at 0, 1, 2 (its queue empties at 2); tenant 2's at 0.5 and 3
    w = {"first": {1: 0.0, 2: 1.0, 3: 2.0, 4: 0.5, 5: 3.0},
         "done": {1: 0.9, 2: 1.9, 3: 2.9, 4: 1.5, 5: 3.5}, "t0": 0.0}
    assert backlogged_jain(w, tenant_of) == jain([2, 1])  # completed by 2.0: jobs 1, 2 and 4


def test_the_flood_is_queued_ahead_and_small_tenants_interleave():
    jobs = schedule_jobs(3, 2, 2)
    assert [j.tenant for j in jobs] == [1, 1, 1, 100, 99, 100, 99]
    assert [j.id for j in jobs] == list(range(1, 8))
