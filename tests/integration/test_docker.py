"""The Docker back end. There is no Docker engine on the project's machines: these tests skip
with the reason where none answers, and run where one does."""

from __future__ import annotations

import psycopg
import pytest

from core.errors import HarnessError
from harness.postgres import docker, provision

pytestmark = [pytest.mark.integration, pytest.mark.docker]


@pytest.fixture(scope="module")
def engine():
    try:
        client = docker.client()
    except HarnessError as exc:
        pytest.skip(f"no Docker engine: {exc}")
    yield client
    client.close()


def test_docker_backend_runs_the_article_database_and_removes_its_container(engine):
    if not docker.has_image(engine, docker.DEFAULT_IMAGE):  # no registry is reachable: never pull
        pytest.skip(f"image {docker.DEFAULT_IMAGE} is not on this machine")
    with provision("docker") as db:
        with psycopg.connect(db.worker_dsn) as conn:
            conn.execute("select set_config('app.tenant', '3', false)")
            assert conn.execute("select count(*) from invoices").fetchone()[0] == 6666
        ours = engine.containers.list(all=True, filters={"label": docker.LABEL})
        assert ours
    left = [c for c in engine.containers.list(all=True, filters={"label": docker.LABEL})
            if c.id in {x.id for x in ours}]
    assert left == []
