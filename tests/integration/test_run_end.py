"""A run ends as soon as it is over: the idle marks, the supervisor's wake-ups, the kept sessions
(issue 36 item 5). Each check fails on the timed settle alone (two poll intervals of quiet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pg_job_chaos.core import idlemark
from pg_job_chaos.core.schedule import JobSpec, Schedule, Timing
from pg_job_chaos.harness.bench import profile
from pg_job_chaos.harness.supervisor import loop

pytestmark = pytest.mark.integration

SCALE = 0.5
POLL = 1.0  # article seconds: a 0.5 s poll, so the timed settle alone takes a second or more
MY_WORKER = str(Path(__file__).resolve().parents[2] / "examples" / "my_worker.py") + ":MyWorker"


def _last_finish(h) -> float:
    return max(r["t"] for r in h.records if r["event"] == "finished")


@pytest.mark.parametrize("design", ["lease", "one-transaction", "lease-heartbeat"])
def test_one_worker_ends_on_its_idle_mark_not_on_the_timed_settle(runner, design):
    """One worker: its look right after its last job finds nothing, its mark says so, and the run ends
    then -- well before the two poll intervals the timed rule waits, with every job done once."""
    s = Schedule(jobs=tuple(JobSpec(i, tenant=i) for i in range(1, 4)), workers=1, design=design,
                 time_scale=SCALE, timing=Timing(poll=POLL))
    h = runner.run(s)
    assert h.ended_by == "quiescent"
    assert [j["status"] for j in h.jobs] == ["done"] * 3 and len(h.runs) == 3
    settle = runner.steps["ended"] - _last_finish(h)
    # The timed rule alone ends no sooner than SETTLE_POLLS polls after the quiet began (after the last
    # finish): any end before that is the mark's. (A quarter of it was a bound on speed, not on the rule.)
    assert settle < loop.SETTLE_POLLS * s.seconds(POLL), settle


def test_two_workers_wait_for_the_idle_one_to_look_again(runner):
    """Two workers: the run ends only after both looked for work after the last record. The one that
    found nothing while the other ran job 3 (at ~0.1 s) would sleep its 0.5 s poll until ~0.6 s, 0.4 s
    after the last finish; the supervisor wakes it (harness/supervisor/loop.py, LookedAgain), so the end comes
    well within that."""
    s = Schedule(jobs=tuple(JobSpec(i, tenant=i, duration=0.2) for i in range(1, 4)), workers=2,
                 design="lease", time_scale=SCALE, timing=Timing(poll=POLL))
    h = runner.run(s)
    assert h.ended_by == "quiescent"
    assert [j["status"] for j in h.jobs] == ["done"] * 3
    settle = runner.steps["ended"] - _last_finish(h)
    # Unwoken, the idle worker would look again no sooner than its poll after its last look, 0.4 s after
    # the last finish: an end before that is the wake's (the bound was 0.2 s, half the margin).
    assert 0 <= settle < s.seconds(POLL) - s.seconds(0.2), settle


def test_a_worker_without_marks_keeps_the_timed_settle(runner):
    """A design whose own loop writes no idle mark (a user's worker, examples/my_worker.py): the two-poll
    rule still ends its run, no sooner."""
    s = Schedule(jobs=(JobSpec(1, tenant=1),), workers=1, design=MY_WORKER, design_options={"poll": "0.02"},
                 time_scale=SCALE, timing=Timing(poll=0.2))
    h = runner.run(s)
    assert h.ended_by == "quiescent" and [j["status"] for j in h.jobs] == ["done"]
    assert runner.steps["ended"] - _last_finish(h) >= loop.SETTLE_POLLS * s.seconds(0.2)


def test_the_profile_splits_a_run_into_its_phases(runner):
    s = Schedule(jobs=tuple(JobSpec(i, tenant=i) for i in range(1, 4)), workers=2, design="lease",
                 time_scale=0.2)
    h, phases = profile.timed_run(runner, s)
    assert h.ended_by == "quiescent" and phases is not None
    assert list(phases) == list(profile.PHASES) and all(v >= 0 for v in phases.values())
    assert phases["jobs"] >= s.seconds(0.05)  # three jobs of 0.05 article seconds, two at once at most


def test_idle_mark_round_trip(tmp_path):
    assert idlemark.read(tmp_path, "w1.0") is None
    mark = idlemark.IdleMark(tmp_path, "w1.0")
    mark.mark(12.5)
    mark.mark(13.25)
    mark.close()
    assert idlemark.read(tmp_path, "w1.0") == 13.25


def test_the_first_sample_waits_for_a_job_and_sees_its_worker(runner):
    """pg_stat_activity is not sampled while the workers start (no worker session exists yet: the sample
    saw nothing and slowed their start), but as soon as the first job has started -- so even a run over
    in less than one sampling period has sampled a worker session (the horizon property's evidence)."""
    s = Schedule(jobs=(JobSpec(1, tenant=1, duration=0.05),), workers=1, design="lease", time_scale=0.2)
    h = runner.run(s)
    first_start = min(r["t"] for r in h.records if r["event"] == "started")
    assert h.samples and min(x["t"] for x in h.samples) >= first_start
    assert any(x["role"] == "worker" for x in h.samples)


def test_the_per_job_ratio_prints_the_wall_clock_and_the_clients_cpu(runner, database):
    """run.py bench's per-job figure: the issue's wall-clock ratio and, beside it, the client's CPU per job
    (the forked worker's, from its reaped rusage, against the bare loop's): both measured, both > 0."""
    import io
    import re

    from pg_job_chaos.harness.bench import cost

    out = io.StringIO()
    s = Schedule(jobs=tuple(JobSpec(i, tenant=i, duration=0.0) for i in range(1, 21)), workers=1,
                 design="lease", time_scale=0.2)
    cost.per_job_ratio(runner, database, s, out, pairs=1)
    text = out.getvalue()
    wall = re.search(r"harness ([\d.]+) ms .* bare psycopg loop ([\d.]+) ms: ([\d.]+)x", text)
    cpu = re.search(r"forked worker ([\d.]+) ms .* the bare loop ([\d.]+) ms: ([\d.]+)x", text)
    assert wall and cpu, text
    assert all(float(x) > 0 for x in (*wall.groups(), *cpu.groups())), text
