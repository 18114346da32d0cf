"""``History.schedule`` is a :class:`~core.schedule.Schedule`, whether the history was given one or its
dict (the runner's ``schedule.to_dict()``, a saved history), and serialises as before (no database)."""

from __future__ import annotations

import json

import pytest

from pg_job_chaos.core.coverage import fault_fates, retry_gaps
from pg_job_chaos.core.history import History, WorkerExit
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule, Timing

STAMPED = Schedule(
    jobs=(JobSpec(1, fault="raise", strikes=1),
          JobSpec(2, tenant=None, duration=1, fault="crash", point="mid-work"),
          JobSpec(3)),
    workers=2, events=(Event("kill", 3, occurrence=2), Event("pause", None, point="sql:claim", duration=1)),
    time_scale=1, timing=Timing(lease=2, heartbeat=0.25), max_attempts=4, pool_size=2, pg_version=17,
    pooler="pgbouncer:transaction:1", design_options={"k": "v"}, libraries={"lib": "1.0"})


def _history(schedule) -> History:
    return History(schedule=schedule, design="lease", tenant_mode="local", records=[], jobs=[], runs=[],
                   exits=[WorkerExit("w1.0", 100, 3.0, "budget", code=0)], t0=0.0, t1=3.0)


def test_a_dict_or_a_schedule_is_the_same_schedule():
    assert _history(STAMPED).schedule is STAMPED
    h = _history(STAMPED.to_dict())  # what the runner gives
    assert isinstance(h.schedule, Schedule) and h.schedule == STAMPED
    assert h.schedule.jobs[1].tenant is None and h.schedule.events[1].job is None
    assert (h.schedule.pooler, h.schedule.pg_version, h.schedule.libraries) == ("pgbouncer:transaction:1", 17,
                                                                                 {"lib": "1.0"})


def test_the_history_json_is_the_schedules_own_as_before():
    h = _history(STAMPED.to_dict())
    assert list(h.to_dict())[0] == "schedule"  # the key keeps its place
    assert h.to_dict()["schedule"] == STAMPED.to_dict()
    # byte for byte: "format" first, no "strikes" where none was given, numbers as given (1 stays 1)
    assert json.dumps(h.to_dict()["schedule"]) == json.dumps(STAMPED.to_dict())
    assert '"time_scale": 1,' in h.to_json() and '"strikes"' in h.to_json()
    assert json.loads(h.to_json())["schedule"]["jobs"][2] == {"id": 3, "tenant": 1, "duration": 0.05,
                                                              "fault": None, "point": None}
    again = History.from_dict(json.loads(h.to_json()))
    assert again.schedule == STAMPED and again.to_json() == h.to_json()
    assert _history(STAMPED).to_json() == h.to_json()


def test_a_hand_written_schedule_takes_the_defaults_for_what_it_leaves_out():
    h = _history({"jobs": [], "timing": {"lease": 1.5}, "time_scale": 0.2})
    assert h.schedule == Schedule(jobs=(), timing=Timing(lease=1.5), time_scale=0.2)
    assert _history({}).schedule == Schedule(jobs=())
    assert _history({"jobs": [{"id": 1}], "timing": None, "format": 1}).schedule == \
        Schedule(jobs=(JobSpec(1),))
    # taken as given, not validated: a history records what ran
    assert _history({"jobs": [{"id": 1}], "max_attempts": None}).schedule.max_attempts is None
    with pytest.raises(TypeError, match="a Schedule or its dict, not list"):
        _history([])


def test_the_readers_read_attributes():
    h = _history(STAMPED.to_dict())
    assert h.job_faults() == {1: {"raise"}, 2: {"crash"}, 3: {"kill"}, None: {"pause"}}
    assert h.transient_strikes() == {1: 1}
    assert fault_fates(h) == [
        {"fault": "raise", "job": 1, "point": "default", "fate": "never reached"},
        {"fault": "crash", "job": 2, "point": "mid-work", "fate": "never reached"},
        {"fault": "kill", "job": 3, "point": "mid-work", "fate": "never reached"},
        {"fault": "pause", "job": None, "point": "sql:claim", "fate": "never reached"}]
    assert retry_gaps(h) == []
