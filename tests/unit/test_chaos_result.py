"""What a test gets back from the plugin: assert_held / assert_violated and their messages."""

from __future__ import annotations

import pytest

from pg_job_chaos import ChaosResult, ChaosViolation, properties
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.properties.core import Result


def _result(**kw) -> ChaosResult:
    res = {n: Result(n, properties.HELD, evidence="held") for n in properties.PROPERTIES}
    res["single-commit"] = Result("single-commit", properties.VIOLATED, count=1, jobs=[1],
                                  evidence="job 1 committed 2 job_runs rows (attempts 1, 2)")
    res["horizon"] = Result("horizon", properties.UNKNOWN, evidence="could not decide: no samples")
    return ChaosResult("lease (local) under faults overrun: 5 runs", res, **kw)


def test_assert_held_names_the_evidence_the_schedule_and_the_replay():
    s = Schedule(jobs=(JobSpec(id=1, tenant=1, duration=0.05, fault="overrun"),), workers=1, design="lease")
    r = _result(schedule=s, file="chaos-out/x.json", replay="pg-job-chaos replay chaos-out/x.json")
    r.assert_held("progress", "horizon")  # held, and unknown is not a violation by default
    with pytest.raises(ChaosViolation) as exc:
        r.assert_held()
    msg = str(exc.value)
    assert "single-commit: violated (jobs 1): job 1 committed 2 job_runs rows" in msg
    assert "counterexample: 1 job, 1 worker" in msg and '"fault": "overrun"' in msg
    assert "saved to chaos-out/x.json" in msg and "replay with: pg-job-chaos replay chaos-out/x.json" in msg


def test_strict_fails_on_unknown_per_call_or_by_default():
    with pytest.raises(ChaosViolation, match="horizon: unknown"):
        _result().assert_held("horizon", strict=True)
    with pytest.raises(ChaosViolation, match="horizon: unknown"):
        _result(strict=True).assert_held("horizon")
    _result(strict=True).assert_held("horizon", strict=False)


def test_assert_violated_and_a_misspelt_name():
    _result().assert_violated("single-commit")
    with pytest.raises(ChaosViolation, match="expected progress to be violated; progress: held"):
        _result().assert_violated("progress")
    with pytest.raises(KeyError):
        _result().assert_held("single-comit")
