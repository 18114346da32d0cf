"""A hosted library's intervals derived in the ratios of its documented defaults (workers/hosted/timing.py):
ratios kept, a fixed or whole-second interval reported broken by its factor, the minimum time scale
that follows, and the recovery period the run's stall and deadline limits stretch by."""

from __future__ import annotations

import math

import pytest

from pg_job_chaos.core.schedule import JobSpec, Schedule, Timing
from pg_job_chaos.harness.supervisor.loop import Supervisor
from pg_job_chaos.workers import hosted, load_design
from pg_job_chaos.workers.design import DesignHandle
from pg_job_chaos.workers.hosted.timing import (
    CRON,
    FIXED,
    WAIT,
    WHOLE,
    Broken,
    Interval,
    Intervals,
    cron,
    on_grid,
)

# procrastinate's shape: the lease is a 30 s threshold; a heartbeat, a cron recovery, a fixed margin.
LIB = Intervals("lib", anchors={"lease": "threshold"}, intervals=(
    Interval("threshold", 30.0, kind=WAIT),
    Interval("heartbeat", 10.0),
    Interval("poll", 5.0),
    Interval("recovery", 600.0, grid=CRON, recovery=True),
    Interval("margin", 0.5, grid=FIXED, kind=WAIT, bound=None),
))


def _at(scale: float, **timing) -> Schedule:
    return Schedule(jobs=(JobSpec(1),), time_scale=scale, timing=Timing(**timing))


@pytest.mark.parametrize("scale", [0.05, 0.5, 1.0, 3.0])
def test_float_intervals_keep_the_documented_ratios(scale):
    v = LIB.values(_at(scale))
    assert v["threshold"] == pytest.approx(scale)  # the anchor is the lease, in real seconds
    assert v["heartbeat"] / v["threshold"] == pytest.approx(10 / 30)
    assert v["poll"] / v["threshold"] == pytest.approx(5 / 30)
    assert v["margin"] == 0.5  # fixed: whatever the scale
    assert not [b for b in LIB.broken(_at(scale)) if b.interval in ("threshold", "heartbeat", "poll")]


def test_a_cron_recovery_keeps_its_ratio_where_a_cron_can_repeat_evenly():
    # 20 leases: 20 s at scale 1 ("*/20" seconds), 10 s at 0.5, 1 min at 3 -- every one a ratio of 20.
    for scale, period, expr in ((1.0, 20.0, "* * * * * */20"), (0.5, 10.0, "* * * * * */10"),
                                (3.0, 60.0, "*/1 * * * *")):
        v = LIB.values(_at(scale))
        assert (v["recovery"], cron(v["recovery"])) == (period, expr)
        assert "recovery" not in {b.interval for b in LIB.broken(_at(scale))}
    # 7 s would fire at :00, :07, ... :56 and :00 again: the nearest even period is 6 s, reported.
    (b,) = [b for b in LIB.broken(_at(0.35)) if b.interval == "recovery"]
    assert b.ratio == pytest.approx(6 / 0.35) and b.documented == 20
    assert "(1.17× too frequent; the nearest period a cron repeats evenly)" in b.message()
    assert b.min_time_scale is None  # a rounding above the floor raises no scale
    with pytest.raises(ValueError):
        cron(7)


def test_below_its_floor_a_cron_breaks_its_ratio_and_sets_the_minimum_time_scale():
    # A cron repeats at most once a second: 20 leases >= 1 s needs a lease of 0.05 s.
    assert LIB.min_time_scale() == pytest.approx(0.05)
    (b,) = [b for b in LIB.broken(_at(0.02)) if b.interval == "recovery"]
    assert (b.per, b.ratio, b.documented) == ("threshold", pytest.approx(50), pytest.approx(20))
    assert b.factor == pytest.approx(2.5) and b.min_time_scale == pytest.approx(0.05)
    assert b.message() == ("lib: recovery / threshold is 50, documented 20 (2.5× too rare; the library "
                           "sets no less than 1 s: time scale 0.05 or more)")


def test_a_fixed_second_is_reported_broken_by_its_factor_at_every_other_scale():
    for scale, factor in ((1.0, 30.0), (0.5, 60.0), (3.0, 10.0)):
        (b,) = [b for b in LIB.broken(_at(scale)) if b.interval == "margin"]
        assert b.factor == pytest.approx(factor)
        assert b.message(WAIT).endswith(f"({factor:g}× too long; fixed in the library)")
    # bound None: reported only, it raises no scale
    assert LIB.without("recovery").min_time_scale() is None


def test_a_floored_interval_keeps_its_ratio_above_the_floor_and_is_reported_below_it():
    # db-scheduler's shape: a 10 s poll to a 30 min threshold, held at 0.1 s at least (adapters/db_scheduler)
    lib = Intervals("lib", anchors={"lease": "threshold"}, intervals=(
        Interval("threshold", 1800.0, kind=WAIT), Interval("poll", 10.0, least=0.1, bound=None)))
    assert lib.values(_at(36.0))["poll"] == pytest.approx(0.2)  # 36 s / 180: above the floor, the ratio
    assert not lib.broken(_at(36.0))
    assert lib.values(_at(2.0))["poll"] == 0.1  # 2 s / 180 = 11 ms: the floor
    (b,) = lib.broken(_at(2.0))
    assert (b.interval, b.factor) == ("poll", pytest.approx(9.0))
    assert b.message().endswith("(9× too rare)")
    assert lib.min_time_scale() is None  # reported only: it raises no scale


def test_the_issue_s_example_reads_as_it_should():
    # recovery every lease against a documented 20 leases (what procrastinate's adapter ran before)
    b = Broken("procrastinate", "recovery period", "stalled threshold", 1.0, 20.0, CRON, 1.0, None)
    assert b.message().startswith("procrastinate: recovery period / stalled threshold is 1, documented 20 "
                                  "(20× too frequent")


def test_a_bounded_fixed_interval_sets_the_minimum_time_scale():
    # pgqueuer's shape: a fixed 1 s wait against a 30 s timeout, allowed 3x: a timeout of 10 s at least.
    lib = Intervals("q", anchors={"lease": "timeout"}, intervals=(
        Interval("timeout", 30.0, kind=WAIT), Interval("wait", 1.0, grid=FIXED, kind=WAIT, bound=3.0)))
    assert lib.min_time_scale() == pytest.approx(10)
    assert lib.min_time_scale(Timing(lease=2.0)) == pytest.approx(5)  # a longer lease needs less scale
    (b,) = lib.broken(_at(3.0))
    assert b.factor == pytest.approx(10) and b.min_time_scale == pytest.approx(10)
    assert "(10× too long; fixed in the library, 3× at most: time scale 10 or more)" in b.message(WAIT)
    (b,) = lib.broken(_at(10.0))
    assert "(3× too long; fixed in the library, within its 3× bound)" in b.message(WAIT)
    assert lib.broken(_at(30.0)) == []  # the documented configuration itself


def test_whole_seconds_round_and_clamp():
    # chancy's shape: a 5 s poll of a 90 s heartbeat timeout, in whole seconds.
    lib = Intervals("c", anchors={"lease": "timeout"}, intervals=(
        Interval("timeout", 90.0, kind=WAIT), Interval("poll", 5.0, grid=WHOLE)))
    assert lib.values(_at(36.0))["poll"] == 2.0  # 36 * 5 / 90
    assert lib.values(_at(1.0))["poll"] == 1.0  # 0.056 s cannot be set: 1 s, 18x too rare
    assert lib.broken(_at(1.0))[0].factor == pytest.approx(18)
    assert lib.min_time_scale() == pytest.approx(18)
    assert on_grid(WHOLE, 2.4, 5.0) == 2.0 and on_grid(FIXED, 2.4, 5.0) == 5.0


def test_another_anchor_and_a_derived_knob():
    # An interval may scale from another knob: the schedule's heartbeat (derived: lease / 4 by default).
    lib = Intervals("h", anchors={"heartbeat": "beat"}, intervals=(
        Interval("beat", 15.0, anchor="heartbeat"), Interval("flush", 3.75, anchor="heartbeat")))
    assert lib.values(_at(2.0)) == {"beat": pytest.approx(0.5), "flush": pytest.approx(0.125)}
    with pytest.raises(ValueError, match="not an anchor"):
        Intervals("x", anchors={"lease": "a"},
                  intervals=(Interval("a", 1.0), Interval("b", 1.0, anchor="poll")))
    with pytest.raises(ValueError, match="names no interval"):
        Intervals("x", anchors={"lease": "missing"}, intervals=(Interval("a", 1.0),))
    with pytest.raises(ValueError):
        Interval("bad", 1.0, grid="hourly")


def test_the_stall_and_deadline_stretch_by_the_longest_recovery_period():
    # article seconds: 20 leases at any scale the cron can follow
    assert LIB.stall_extra(_at(1.0)) == pytest.approx(20) and LIB.stall_extra(_at(0.5)) == pytest.approx(20)
    assert LIB.stall_extra(_at(0.02)) == pytest.approx(50)  # clamped to 1 s: 50 leases of 0.02 s
    assert LIB.without("recovery").stall_extra(_at(1.0)) == 0.0


class _Hosted(hosted.HostedDesign):
    name = "timed"
    TIMING = LIB


def test_the_supervisor_stretches_its_limits_and_notes_the_broken_ratios(tmp_path):
    s = _at(1.0)
    sup = Supervisor(s, DesignHandle.of(_Hosted()).for_run(s), admin_dsn="", worker_dsn="", run_dir=tmp_path)
    assert sup.extra == pytest.approx(20)
    assert sup.notes == ["lib: margin / threshold is 0.5, documented 0.0167 (30× too long; "
                         "fixed in the library)"]
    built_in = Supervisor(s, load_design("lease-heartbeat").for_run(s), admin_dsn="", worker_dsn="",
                          run_dir=tmp_path)
    # a built-in design: nothing stretched, nothing noted
    assert built_in.extra == 0.0 and built_in.notes == []
    assert hosted.HostedDesign().stall_extra(s) == 0.0 and hosted.HostedDesign().intervals(s) == {}


def test_procrastinate_and_pgqueuer_declare_their_documented_defaults():
    pytest.importorskip("procrastinate")
    pytest.importorskip("pgqueuer")
    from pg_job_chaos.adapters.pgqueuer import PgQueuer
    from pg_job_chaos.adapters.procrastinate import Procrastinate

    p, q = Procrastinate(), PgQueuer()
    v = p.intervals(_at(1.0))
    assert (v["stalled threshold"], v["heartbeat interval"], v["recovery period"]) == \
        (1.0, pytest.approx(1 / 3), 20)
    assert Procrastinate.min_time_scale == pytest.approx(0.05) and \
        p.stall_extra(_at(1.0)) == pytest.approx(20)
    assert Procrastinate(recovery="off").stall_extra(_at(1.0)) == 0.0
    assert Procrastinate(recovery="off").timing_notes(_at(1.0)) == []  # no margin without the periodic task
    w = q.intervals(_at(10.0))
    assert (w["heartbeat timeout"], w["dequeue timeout"], w["retry initial delay"]) == \
        (10, 10, pytest.approx(1 / 3))
    assert PgQueuer.min_time_scale == pytest.approx(10) and q.stall_extra(_at(10.0)) == pytest.approx(1)
    assert any("notify wait / heartbeat timeout is 0.333, documented 0.0333 (10× too long" in n
               for n in q.timing_notes(_at(3.0)))
    assert (q.batch_size, q.max_concurrent_tasks) == (10, None)  # pgqueuer's defaults
    assert "heartbeat timeout is 2 s (--design-option)" in \
        PgQueuer(heartbeat_timeout="2").timing_notes(_at(10))[-1]
    assert math.isclose(PgQueuer(batch_size="1", max_concurrent_tasks="2").max_concurrent_tasks, 2)
