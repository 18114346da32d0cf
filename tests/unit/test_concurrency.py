"""A hosted design's concurrency (workers/design.py) sizes the body's pool; core/overlap.py counts how many
bodies ran at once. No database."""

from __future__ import annotations

import pytest

from pg_job_chaos.core import overlap
from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.history import History
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.report import text
from pg_job_chaos.workers.design import OVERLAP_CAP, DesignHandle
from pg_job_chaos.workers.hosted import HostedDesign
from pg_job_chaos.workers.loading import load_design


def _schedule(jobs: int, **kw) -> Schedule:
    return Schedule(jobs=tuple(JobSpec(i) for i in range(1, jobs + 1)), **kw)


def _hosted(**members) -> DesignHandle:
    return DesignHandle.of(type("Mine", (HostedDesign,), members)(), "mine")


def test_a_built_in_design_keeps_the_schedules_pool():
    handle = load_design("lease")
    assert handle.concurrency == "pool"
    assert handle.pool_size(_schedule(20)) == 1
    assert handle.pool_size(_schedule(20, pool_size=3)) == 3


def test_a_hosted_design_that_declares_none_keeps_its_pool():
    handle = _hosted()
    assert handle.pool_size(_schedule(20, pool_size=2)) == 2


@pytest.mark.parametrize("concurrency, jobs, attempts, size", [
    (1, 1, 3, 3),  # one job: its three attempts may overlap (pg-boss past its expiration)
    (50, 20, 3, 60),  # jobs x attempts covers the 20 at once and their retries
    (50, 40, 3, OVERLAP_CAP),  # capped ...
    (100, 100, 3, 100),  # ... never below what runs at once
    (None, 100, 1, 100),  # unlimited: every job at once
])
def test_a_declared_concurrency_sizes_the_pool(concurrency, jobs, attempts, size):
    handle = _hosted(concurrency=concurrency)
    assert handle.pool_size(_schedule(jobs, max_attempts=attempts)) == size
    # the runner stamps it into the schedule: stamping again changes nothing
    assert handle.pool_size(_schedule(jobs, max_attempts=attempts, pool_size=size)) == size


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10", True])
def test_a_concurrency_that_is_not_a_count_is_a_usage_error(bad):
    with pytest.raises(UsageError, match="concurrency"):
        _hosted(concurrency=bad)


def _history(*spans: tuple[str, int, float, float | None]) -> History:
    records = []
    for worker, job, start, end in spans:
        records.append({"t": start, "worker": worker, "event": "started", "job": job, "attempt": 1})
        if end is not None:
            records.append({"t": end, "worker": worker, "event": "finished", "job": job, "attempt": 1})
    return History(schedule=_schedule(4), design="d", tenant_mode="local", records=records, jobs=[], runs=[],
                   exits=[], t1=10.0)


def test_bodies_at_once_per_worker_and_over_the_run():
    h = _history(("w1.0", 1, 0.0, 2.0), ("w1.0", 2, 1.0, 3.0), ("w1.0", 3, 1.5, 1.6),
                 ("w2.0", 4, 1.55, 5.0))
    figure = overlap.bodies_at_once(h)
    assert figure.workers == {"w1.0": 3, "w2.0": 1}
    assert (figure.worker, figure.run) == (3, 4)
    assert figure.to_dict() == {"run": 4, "worker": 3, "workers": {"w1.0": 3, "w2.0": 1}}


def test_one_that_ends_as_the_next_starts_does_not_overlap_it():
    h = _history(("w1.0", 1, 0.0, 1.0), ("w1.0", 2, 1.0, 2.0))
    assert overlap.bodies_at_once(h).run == 1


def test_an_execution_with_no_end_runs_to_the_end_of_the_run():
    h = _history(("w1.0", 1, 0.0, None), ("w1.0", 2, 9.0, 9.5))
    assert overlap.bodies_at_once(h).worker == 2


def test_a_search_summary_and_its_report_line():
    one, two = _history(("w1.0", 1, 0.0, 1.0)), _history(("w1.0", 1, 0.0, 2.0), ("w2.0", 2, 1.0, 3.0))
    figure = overlap.summary([one, two])
    assert figure == {"runs": 2, "worker": 1, "run": 2}
    assert text.bodies_line(figure) == ["bodies at once (a figure, not a verdict): at most 1 in one worker, "
                                        "2 in one run of 2"]
    assert overlap.summary([]) == {} and text.bodies_line({}) == []
