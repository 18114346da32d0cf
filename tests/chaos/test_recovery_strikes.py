"""A restart aimed at a hosted library's recovery (issue 47, item 3): for procrastinate and DBOS, the
small-scope pass's recovery schedules are made from the statements a fault-free run showed and the
adapter's declared ``recovery_statements``, and a ``restart`` placed before one of them strikes there --
the run's injected faults name that statement. What the library then does is its guarantees table's
(``docs/findings/libraries.md``, "restart aimed at recovery"), not asserted here. That each declaration
names a statement the library sends: ``tests/unit/test_recovery_statements.py``.

Each recovery statement struck here is sent at every worker's start, so a short fault-free run shows it
whatever the timing: procrastinate's prune of stalled workers (``worker.py:446``), DBOS's launch recovery
(``get_pending_workflows``, ``_dbos.py:896-909``). On a server of durable settings, as the command line
starts one for restart (``tests/chaos/test_restart.py``)."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.schedule import STATEMENT_PREFIX, JobSpec, Schedule
from pg_job_chaos.faults import parse_faults
from pg_job_chaos.harness.engine import smallscope
from pg_job_chaos.harness.postgres import provision
from pg_job_chaos.harness.postgres.local import DURABLE_SETTINGS
from pg_job_chaos.harness.runner import Runner
from pg_job_chaos.workers import load_design

pytestmark = pytest.mark.chaos

# design: (its time scale, the recovery statement its every worker sends at start)
CASES = {"procrastinate": (0.5, "4fbfe16c"),  # prune_stalled_workers
         "dbos": (1.0, "682c075a")}  # get_pending_workflows


@pytest.fixture(scope="module")
def durable():
    with provision(settings=DURABLE_SETTINGS) as db, Runner(db) as runner:
        yield runner


@pytest.mark.parametrize("design", sorted(CASES))
def test_a_restart_aimed_at_a_recovery_statement_strikes_there(durable, design):
    pytest.importorskip(design, reason=f"{design} is not installed (pip install -e '.[libraries]')")
    scale, start_statement = CASES[design]
    handle = load_design(design)
    assert start_statement in handle.recovery_statements
    seen = durable.run(Schedule(jobs=(JobSpec(1, tenant=1),), workers=2, design=design,
                                time_scale=scale)).statements()
    cases = smallscope.recovery_schedules(seen, handle.recovery_statements, faults=parse_faults("restart"),
                                          design=design, tenant_mode="local", time_scale=scale)
    points = [s.events[0].point for _, s in cases]
    # one restart per declared statement the run showed, and nowhere else
    assert points and set(points) <= {STATEMENT_PREFIX + n for n in handle.recovery_statements}
    assert STATEMENT_PREFIX + start_statement in points
    assert all(label.endswith("; recovery") and s.events[0].fault == "restart" for label, s in cases)

    label, schedule = next((label, s) for label, s in cases
                           if s.events[0].point == STATEMENT_PREFIX + start_statement)
    h = durable.run(schedule)
    struck = [(i["fault"], i["point"]) for i in h.injected]
    assert struck[:2] == [("restart", STATEMENT_PREFIX + start_statement),
                          ("server-started", STATEMENT_PREFIX + start_statement)], (label, h.injected)
