"""The pytest plugin gives a run the server its faults declare they need (``faults/catalogue.py``), as the
command line does (``harness.session.server_settings``): a ``restart`` runs on durable settings, never on
the throwaway ``fsync=off`` of the session's server, where a lost committed claim would be the harness's
doing and be reported as the design's."""

from __future__ import annotations

import pytest

from pg_job_chaos.core.errors import HarnessError
from pg_job_chaos.harness.postgres import ServerSpec, provision
from pg_job_chaos.harness.postgres.local import DURABLE_SETTINGS
from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

NEEDS = """
from pg_job_chaos import Event, JobSpec, Schedule


def test_a_run_with_a_restart_is_on_durable_settings(chaos_session):
    s = Schedule(jobs=(JobSpec(1, duration=0.5),), design="lease", time_scale=0.2,
                 events=(Event("restart", 1, point="mid-work", duration=1.0),))
    server = chaos_session.run(s, save=False).history.server
    assert server["settings"]["fsync"] == "on" and server["settings"]["synchronous_commit"] == "on", server


def test_a_search_with_restart_is_on_durable_settings(chaos_run):
    result = chaos_run.search(design="lease-heartbeat", faults="restart", examples=1, seed=1, """ \
    """workers=1, budget=5)
    server = result.report.data["server"]
    assert server["settings"]["fsync"] == "on" and server["settings"]["synchronous_commit"] == "on", server


def test_the_session_server_stays_throwaway(chaos_session, chaos_database):
    # the restart got a server of its own; the session's own keeps its fast settings for every other run
    assert chaos_session.runner.database is chaos_database and chaos_database.settings["fsync"] == "off"
"""

REFUSED = """
import pytest

from pg_job_chaos import Event, JobSpec, Schedule
from pg_job_chaos.core.errors import UsageError


def test_a_restart_on_a_dsn_is_refused(chaos_session):
    s = Schedule(jobs=(JobSpec(1),), design="lease", events=(Event("restart", 1),))
    with pytest.raises(UsageError, match=r"the restart fault needs the local server \\(postgres local\\)"):
        chaos_session.run(s)
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeini("[pytest]\nchaos_examples = 1\nchaos_time_scale = 0.2\n")
    return pytester


def test_a_restart_from_pytest_runs_on_durable_settings(project: pytest.Pytester):
    project.makepyfile(test_needs=NEEDS)
    r = project.runpytest_subprocess("-p", "pg_job_chaos.plugin", "--strict-markers", "--chaos-out", "found",
                                     timeout=600)
    r.assert_outcomes(passed=3)


def test_a_restart_on_a_server_that_cannot_restart_is_refused(project: pytest.Pytester, database):
    """A DSN's server is not the harness's to stop: the run is refused before anything starts."""
    project.makepyfile(test_dsn=REFUSED)
    r = project.runpytest_subprocess("-p", "pg_job_chaos.plugin", "--chaos-postgres", database.admin_dsn,
                                     timeout=600)
    r.assert_outcomes(passed=1)


def test_a_server_that_does_not_run_on_the_settings_asked_for_is_refused(database):
    """Provisioning checks what the server reports against the spec's settings: a DSN's server is not
    started by the harness, so it cannot be given them."""
    spec = ServerSpec(database.admin_dsn, settings=DURABLE_SETTINGS)  # the suite's server runs fsync=off
    with pytest.raises(HarnessError, match=r"does not run on the settings the run needs \(settings\): "
                                           r"fsync=on \(it runs off\)"):
        with provision(spec):
            pass
