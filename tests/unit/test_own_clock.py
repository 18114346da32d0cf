"""Each system judged on its own clock (issue 35, item 3) and unknowns that are the design's, not the
run's (item 7), on hand-written histories and hand-made designs -- no database.

``horizon`` is half a lease: the schedule's only for a system whose lease the harness sets (a built-in
design, a hosted library whose ``TIMING`` anchors an interval to the schedule's lease); a library's own
fixed interval, or a declared ``lease_seconds``, otherwise; none at all: unknown, not judged, with the
figure. A property not judged for the design does not fail ``--strict``; a run's unknown still does.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import pytest

from pg_job_chaos import properties
from pg_job_chaos.core.errors import EXIT_HELD, EXIT_VIOLATED
from pg_job_chaos.core.schedule import JobSpec, Schedule, Timing
from pg_job_chaos.harness.report import text as report
from pg_job_chaos.harness.report.result import Report
from pg_job_chaos.properties import HELD, UNKNOWN, VIOLATED, Result, aggregate, undecided_names
from pg_job_chaos.properties.health import horizon_threshold
from pg_job_chaos.workers import Clock, DesignHandle, load_design
from pg_job_chaos.workers.hosted import HostedDesign
from pg_job_chaos.workers.hosted.timing import FIXED, WAIT, Interval, Intervals
from tests.unit.test_properties import execution, one, rec, sample, sane, schedule

# the three clocks a history can carry (what DesignHandle.clock returns), at time scale 0.5
SCHEDULE = Clock(0.5, "schedule", "the schedule's lease")
LIBRARY = Clock(0.5, "timing", "q's stalled threshold, set from the schedule's lease")
FIXED_4H = Clock(14400.0, "timing", "q's lock timeout, fixed in the library")
NONE = Clock(None, None, "q has no lease the harness sets")


def hosted(clock: Clock | None, samples: list[dict], **changes):
    """A hosted queue's run at time scale 0.5 (half a schedule lease: 0.25 s) with *samples*."""
    h = sane(samples=samples, sched=schedule(time_scale=0.5), **changes)
    h.design, h.hosted, h.clock = "q", True, clock
    return h


# One background session holding a snapshot for a fixed 0.98 s (DBOS's idle advisory-lock transaction).
BACKGROUND = [sample(1.5, 0.98, app="w1.0/dbos"), sample(2.5, 0.2)]


# --- horizon on the design's own clock -------------------------------------------------------------

def test_the_schedules_lease_judges_a_built_in_design_as_before():
    for clock in (SCHEDULE, None):  # None: a history saved before the clock was recorded
        h = sane(samples=BACKGROUND, sched=schedule(time_scale=0.5))
        h.clock = clock
        r = one("horizon", h)
        assert (r.status, r.count) == (VIOLATED, 1) and r.judged
        assert r.evidence == ("w1.0/dbos held a transaction with a snapshot open for 0.98 s during job 1 "
                              "(threshold 0.25 s)")


def test_a_library_whose_lease_the_harness_sets_is_judged_against_it_and_says_whose():
    r = one("horizon", hosted(LIBRARY, BACKGROUND))
    assert (r.status, r.count) == (VIOLATED, 1)
    assert r.evidence.endswith("(threshold 0.25 s, half of q's stalled threshold, set from the schedule's "
                               "lease (0.5 s))")


def test_a_library_with_a_fixed_lease_is_judged_against_its_own_and_holds_a_long_transaction():
    r = one("horizon", hosted(FIXED_4H, [sample(1.5, 30.0, xid="9")]))
    assert r.status == HELD
    assert r.evidence.endswith("older than 7200.00 s, half of q's lock timeout, fixed in the library "
                               "(14400 s)")


def test_a_system_without_a_lease_gets_the_figure_and_no_verdict():
    r = one("horizon", hosted(NONE, BACKGROUND))
    assert (r.status, r.judged, r.count, r.jobs) == (UNKNOWN, False, 0, ())
    assert r.evidence == ("not judged for this design: the longest worker transaction sampled: w1.0/dbos "
                          "held a transaction with a snapshot open for 0.98 s during job 1; no verdict: "
                          "q has no lease the harness sets")
    assert undecided_names({"horizon": r}) == []  # --strict does not fail on it
    quiet = one("horizon", hosted(NONE, [sample(1.5, 9.0, xid=None, xmin=None)]))
    assert quiet.evidence.startswith("not judged for this design: 1 worker sample, none in a transaction")


def test_a_hosted_history_without_its_clock_is_a_runs_unknown():
    r = one("horizon", hosted(None, BACKGROUND))
    assert (r.status, r.judged) == (UNKNOWN, True)
    assert "the history does not record the design's lease" in r.evidence
    assert horizon_threshold(hosted(LIBRARY, [])).seconds == 0.25


# --- why no worker session was sampled -------------------------------------------------------------

def test_no_worker_sample_says_the_sessions_named_themselves():
    named = [sample(1.5, 0.1, app="myapp", role="other"), sample(1.6, 0.1, app="", role="other")]
    r = one("horizon", sane(samples=named))
    assert (r.status, r.judged) == (UNKNOWN, True)
    assert "the sessions sampled were named myapp -- the design's connections name themselves" in r.evidence
    assert "ctx.identity" in r.evidence


def test_no_worker_sample_says_the_sampler_failed_or_the_run_was_too_short():
    failed = sane(samples=[])
    failed.notes = ["supervisor: sampling pg_stat_activity failed: timeout"]
    assert one("horizon", failed).evidence.endswith(
        "the supervisor's sampling failed (supervisor: sampling pg_stat_activity failed: timeout)")
    short = sane(samples=[sample(0.01, None, app="", role="other", xmin=None)], t1=0.3)
    assert "the run lasted 0.30 s and no worker connection was open at a sample" in \
        one("horizon", short).evidence
    # without a lease the reason is the figure, and the design's: not judged
    r = one("horizon", hosted(NONE, []))
    assert not r.judged and "no worker session was sampled" in r.evidence


# --- unknowns of the design: library-one-finish, pool-hygiene ------------------------------------------

def test_an_accepted_finishes_that_raised_is_the_runs_unknown_and_fails_strict():
    h = hosted(LIBRARY, [])
    h.finishes, h.notes = None, ["q's accepted_finishes raised RuntimeError: no table"]
    r = one("library-one-finish", h)
    assert (r.status, r.judged) == (UNKNOWN, True) and "RuntimeError: no table" in r.evidence
    h.notes = []
    assert not one("library-one-finish", h).judged


def test_pool_hygiene_on_the_workers_own_connections_is_not_judged():
    records = [*execution("w1.0", 1, 1, 1.0, 2.0), *execution("w1.0", 2, 1, 2.0, 3.0)]
    for r in records:
        if r["event"] == "started":
            r["own_tenant"] = True
    result = one("pool-hygiene", sane(records=records))
    assert (result.status, result.judged) == (UNKNOWN, False)
    # without the worker's own connections, nothing counted is still the run's unknown
    assert one("pool-hygiene", sane(records=[rec(1.0, "w1.0", "started", 1, 1)])).judged


# --- composing, --strict, JUnit -----------------------------------------------------------------------

def test_a_judged_unknown_is_never_hidden_by_a_not_judged_one_and_only_unknown_may_be_not_judged():
    design = Result("horizon", UNKNOWN, evidence="not judged for this design: no lease", judged=False)
    run = Result("horizon", UNKNOWN, evidence="no worker session was sampled")
    held = Result("horizon", HELD, evidence="ok")
    assert not aggregate([{"horizon": design}, {"horizon": held}])["horizon"].judged
    mixed = aggregate([{"horizon": design}, {"horizon": run}])["horizon"]
    assert mixed.judged and mixed.evidence == "unknown in 2 of 2 runs: no worker session was sampled"
    with pytest.raises(ValueError, match="only unknown"):
        Result("horizon", HELD, judged=False)


def _results(judged: bool) -> dict:
    out = {n: Result(n, HELD, evidence="held in all 3 runs") for n in properties.PROPERTIES}
    out["library-one-finish"] = Result("library-one-finish", UNKNOWN, evidence="untold", judged=judged)
    return out


@pytest.mark.parametrize("judged, code", [(False, EXIT_HELD), (True, EXIT_VIOLATED)])
def test_strict_fails_on_a_runs_unknown_only(tmp_path, judged, code):
    r = Report("search", "q", {"q": _results(judged)}, strict=True)
    assert r.exit_code() == code and (r.undecided() == ["library-one-finish"]) is judged
    passed_over = "--strict passes over what is not judged for this design (unknown, never held): " \
                  "library-one-finish"
    assert (passed_over in r.warnings()) is not judged
    assert passed_over not in Report("search", "q", {"q": _results(judged)}, strict=False).warnings()
    path = tmp_path / "junit.xml"
    report.junit(str(path), r.suites, strict=True)
    case = next(c for c in ET.parse(path).getroot().iter("testcase") if c.get("name") == "library-one-finish")
    assert (case.find("failure") is not None) is judged and (case.find("skipped") is not None) is not judged


# --- the handle resolves the lease once -------------------------------------------------------------------

class _Timed(HostedDesign):
    name = "q"
    TIMING = Intervals("q", anchors={"lease": "stalled threshold", "poll": "poll"}, intervals=(
        Interval("stalled threshold", 30.0, kind=WAIT), Interval("poll", 5.0, anchor="poll")))


class _Fixed(HostedDesign):
    name = "q"
    TIMING = Intervals("q", anchors={"lease": "lock timeout"}, intervals=(
        Interval("lock timeout", 14400.0, grid=FIXED, kind=WAIT, bound=None),))


class _PollOnly(HostedDesign):
    name = "q"
    TIMING = Intervals("q", anchors={"poll": "poll"}, intervals=(Interval("poll", 1.0, anchor="poll"),))


class _Declares(_PollOnly):
    def lease_seconds(self, schedule):
        return 30.0


def test_the_handle_resolves_whose_lease_a_run_has():
    s = Schedule(jobs=(JobSpec(1),), time_scale=0.5, timing=Timing(lease=2.0))
    assert load_design("lease").clock(s) == dataclasses.replace(SCHEDULE, seconds=1.0)
    assert DesignHandle.of(_Timed()).clock(s) == Clock(
        1.0, "timing", "q's stalled threshold, set from the schedule's lease")
    assert DesignHandle.of(_Fixed()).clock(s) == FIXED_4H
    none = DesignHandle.of(_PollOnly()).clock(s)
    assert none.seconds is None and none.what.startswith("q has no lease the harness sets")
    declared = Clock(30.0, "declared", "q's own lease (its lease_seconds)")
    assert DesignHandle.of(_Declares()).clock(s) == declared


def test_a_historys_clock_round_trips_through_json_and_a_saved_dict_still_loads():
    import json

    from pg_job_chaos.core.history import History

    h = hosted(LIBRARY, BACKGROUND)
    again = History.from_dict(json.loads(h.to_json()))
    assert again.clock == LIBRARY and isinstance(again.clock, Clock)
    saved = {**json.loads(h.to_json()), "clock": {"seconds": None, "basis": None, "what": "q has no lease"}}
    assert History.from_dict(saved).clock == Clock(None, None, "q has no lease")
    assert History.from_dict({**saved, "clock": None}).clock is None
    assert horizon_threshold(History.from_dict(json.loads(h.to_json()))) == horizon_threshold(h)


def test_a_design_of_its_own_kind_states_its_clock_and_a_wrong_one_is_a_usage_error():
    from pg_job_chaos.core.errors import UsageError

    s = Schedule(jobs=(JobSpec(1),), time_scale=0.5, timing=Timing(lease=2.0))

    class _Own(_PollOnly):
        def clock(self, schedule):
            return Clock(7.0, "declared", "q's visibility timeout")

    class _Wrong(_PollOnly):
        def clock(self, schedule):
            return {"seconds": 7.0}

    assert DesignHandle.of(_Own()).clock(s) == Clock(7.0, "declared", "q's visibility timeout")
    with pytest.raises(UsageError, match="not a workers.interface.Clock"):
        DesignHandle.of(_Wrong()).clock(s)
