"""The Docker back end against a real engine, with an image built here from the binaries the harness
already uses (no registry is reachable). ``.ci/run`` starts ``dockerd --bridge=none --iptables=false``
when no engine answers, so the container shares the host's network on a free 127.0.0.1 port and no
packet leaves the loopback. These tests skip with the reason only where no engine answers at all."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time

import psycopg
import pytest

from pg_job_chaos.core.errors import HarnessError
from pg_job_chaos.harness.postgres import binaries, docker, image, provision
from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.docker,
              pytest.mark.xdist_group("harness-processes")]  # test_postgres.py


@pytest.fixture(scope="module")
def engine():
    try:
        client = docker.client()
    except HarnessError as exc:
        pytest.skip(f"no Docker engine: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="module")
def local_image(engine):
    bins = binaries.find()
    # this session's own tag: two suites on one engine (a shared CI runner) each remove only theirs -- a
    # fixed tag had one suite's teardown remove the image the other's tests were running
    tag = f"pgjc-test-postgres:{bins.version}-{secrets.token_hex(4)}"
    image.build(engine, bins, tag)
    yield tag
    engine.images.remove(tag, force=True)


def _ids(engine) -> set[str]:
    return {c["Id"] for c in docker.labelled(engine)}


def _volume_names(ctr: dict) -> set[str]:
    return {m["Name"] for m in ctr.get("Mounts") or [] if m.get("Type") == "volume"}


def _volumes(engine) -> set[str]:
    return {v.name for v in engine.volumes.list()}


def test_docker_backend_runs_the_article_database_and_removes_container_and_volume(engine, local_image):
    with provision(f"docker:{local_image}") as db:
        with psycopg.connect(db.worker_dsn) as conn:
            conn.execute("select set_config('app.tenant', '3', false)")
            assert conn.execute("select count(*) from invoices").fetchone()[0] == 6666
        (ctr,) = [c for c in docker.labelled(engine) if c["Id"].startswith(db.server.split()[4])]
        volumes = _volume_names(ctr)
        assert volumes, "the image declares a VOLUME: the container has one"
        if not engine.networks.list(names=["bridge"]):  # the loopback-only engine of these tests
            assert ctr["HostConfig"]["NetworkMode"] == "host"
            assert "127.0.0.1:" in db.server
    assert ctr["Id"] not in _ids(engine)
    assert not volumes & _volumes(engine), "the container's volume was left behind"


def test_sweep_removes_a_container_whose_owner_is_dead_and_spares_a_live_owners(engine, local_image):
    labels = {docker.LABEL: "1"}
    dead = engine.containers.create(local_image, labels={**labels, f"{docker.LABEL}.owner":
                                                         f"{socket.gethostname()}:{2**22 + 1}:0"})
    alive = engine.containers.create(local_image, labels={**labels, f"{docker.LABEL}.owner": docker._owner()})
    try:
        assert docker.sweep(engine) == [dead.id]
        assert dead.id not in _ids(engine) and alive.id in _ids(engine)
        docker._remove(engine, dead.id)  # already gone: no error
    finally:
        for ctr in (dead, alive):
            docker._remove(engine, ctr.id)


@pytest.mark.slow
def test_sigkill_of_the_harness_leaves_no_container_and_no_volume(engine, local_image):
    before = _ids(engine)
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "--postgres", f"docker:{local_image}",
                             "--design", "lease", "--faults", "overrun", "--examples", "50"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        ctr, volumes = None, set()
        deadline = time.monotonic() + 120
        # The engine can list a container being created before its anonymous volume is in its
        # ``Mounts``: wait for both, the volume's name is what the test later looks for.
        while time.monotonic() < deadline and not volumes:
            mine = [c for c in docker.labelled(engine) if c["Id"] not in before
                    and docker.owner(c).split(":")[1:2] == [str(proc.pid)]]
            ctr = mine[0] if mine else None
            volumes = _volume_names(ctr) if ctr else set()
            time.sleep(0.3)
        assert ctr is not None, "the harness started no container"
        assert volumes, "the image declares a VOLUME: the harness's container has one"
        time.sleep(3.0)  # into the run: the database is being created and filled
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (ctr["Id"] in _ids(engine) or volumes & _volumes(engine)):
            time.sleep(0.5)
        assert ctr["Id"] not in _ids(engine), "container left behind"
        assert not volumes & _volumes(engine), "volume left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)  # reaped: an unwaited Popen warns at collection, inside a later test
