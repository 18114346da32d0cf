"""The ``docker[:IMAGE]`` back end: a throwaway PostgreSQL container through the Docker SDK.

Every container carries the label ``pg-job-chaos`` and its owner (host, pid, start time), so the
next run removes leftovers whose owner is dead; it is removed at exit, or by the janitor.
With no Docker engine answering, :func:`start` raises :class:`HarnessError` in one line.

Networking: a port published on 127.0.0.1 (the usual form) when the engine has its ``bridge``
network; on an engine started without one (``dockerd --bridge=none --iptables=false``, as the tests
here do, so that no packet leaves the loopback) the container shares the host's network and the
server listens on a free 127.0.0.1 port. Removal always takes the container's volumes with it.
"""

from __future__ import annotations

import gc
import os
import secrets
import socket
import time
import warnings
from dataclasses import dataclass

import psycopg

from ...core.errors import HarnessError
from ...core.procs import process_start_time

DEFAULT_IMAGE = "postgres:17.10"
LABEL = "pg-job-chaos"
READY_TIMEOUT = 120.0


def client():
    """A Docker client whose engine answered a ping, or :class:`HarnessError`."""
    import docker

    c = None
    reason = None
    try:
        c = docker.from_env(timeout=10)
        c.ping()
        return c
    except Exception as exc:  # the SDK raises several unrelated types for "no engine"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if c is not None:
        c.close()
    # The SDK leaves the socket of a failed version probe unclosed; collect it here (after the
    # exception and its frames are gone), quietly, rather than let a ResourceWarning surface later.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    raise HarnessError(f"no Docker engine answers ({reason}); use the local server or a DSN (postgres)")


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{process_start_time(os.getpid())}"


def _owner_dead(owner: str) -> bool:
    try:
        host, pid, start = owner.split(":")
    except ValueError:
        return False
    return host == socket.gethostname() and process_start_time(int(pid)) != start


def labelled(c) -> list[dict]:
    """Our labelled containers as the engine lists them (``Id``, ``Labels``, ``Mounts``), in one call.

    Hazard: the SDK's ``containers.list`` inspects each listed container in a second request, and one
    removed in between (by its owner, or a janitor) raises NotFound; the listing itself does not."""
    return c.api.containers(all=True, filters={"label": LABEL})


def owner(listed: dict) -> str:
    """The owner label (``host:pid:start``) of a container as :func:`labelled` lists it."""
    return (listed.get("Labels") or {}).get(f"{LABEL}.owner", "")


def _remove(c, container_id: str) -> None:
    """Remove a container and its anonymous volumes (``v``); one already gone is gone either way."""
    from docker.errors import NotFound  # the SDK is imported where used: the janitor starts light

    try:
        c.api.remove_container(container_id, force=True, v=True)
    except NotFound:
        pass


def sweep(c) -> list[str]:
    """Remove our labelled containers whose owner process on this host is dead."""
    dead = [ctr["Id"] for ctr in labelled(c) if _owner_dead(owner(ctr))]
    for container_id in dead:
        _remove(c, container_id)
    return dead


def remove_container(container_id: str) -> None:
    """Best effort, for cleanup paths: never raises (no engine answering included)."""
    try:
        _remove(client(), container_id)
    except Exception:
        pass


@dataclass
class DockerServer:
    container_id: str
    port: int
    password: str
    image: str
    janitor_key: str | None = None

    @property
    def admin_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres password={self.password} dbname=postgres"

    def describe(self) -> str:
        return (f"PostgreSQL in Docker container {self.container_id[:12]} ({self.image}) "
                f"on 127.0.0.1:{self.port}")

    def stop(self, janitor=None) -> None:
        remove_container(self.container_id)
        if janitor is not None and self.janitor_key:
            janitor.forget(self.janitor_key)


def has_image(c, image: str) -> bool:
    """Whether *image* is in the engine's local store (nothing is fetched)."""
    import docker

    try:
        c.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False


def start(image: str | None = None, *, janitor=None, settings: dict[str, str] | None = None) -> DockerServer:
    """A container of *image* (default :data:`DEFAULT_IMAGE`) on a loopback port; *settings* over its
    throwaway ones (what the run's faults need). :class:`HarnessError` when it cannot start."""
    c = client()
    sweep(c)
    image = image or DEFAULT_IMAGE
    password = secrets.token_hex(16)
    if not has_image(c, image):
        # Never pulled implicitly: the harness makes no traffic beyond the machine on its own.
        raise HarnessError(f"image {image} is not on this machine; build or pull it first "
                           f"(docker pull {image})")
    from .local import MAX_CONNECTIONS  # the local server's room for every slot's workers

    command = ["postgres", "-c", "fsync=off", "-c", f"max_connections={MAX_CONNECTIONS}"]
    for k, v in (settings or {}).items():  # after the defaults: the last -c of a name wins
        command += ["-c", f"{k}={v}"]
    host_port = None
    network: dict[str, object]  # the keywords of containers.run that place it on a network
    if c.networks.list(names=["bridge"]):
        network = {"ports": {"5432/tcp": ("127.0.0.1", None)}}
    else:  # no bridge: the host's network, and only its loopback
        from .local import free_port

        host_port = free_port()
        network = {"network_mode": "host"}
        command += ["-c", "listen_addresses=127.0.0.1", "-c", f"port={host_port}"]
    try:
        ctr = c.containers.run(
            image, detach=True, environment={"POSTGRES_PASSWORD": password},
            labels={LABEL: "1", f"{LABEL}.owner": _owner()}, command=command, **network,
        )
    except Exception as exc:
        raise HarnessError(f"could not start a {image} container: {exc}") from None
    key = janitor.register("container", id=ctr.id) if janitor else None
    server = None
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            ctr.reload()
            ports = (ctr.attrs["NetworkSettings"].get("Ports") or {}).get("5432/tcp")
            port = host_port or (int(ports[0]["HostPort"]) if ports else None)
            if port:
                server = DockerServer(ctr.id, port, password, image, key)
                try:
                    psycopg.connect(server.admin_dsn, connect_timeout=2).close()
                    return server
                except psycopg.OperationalError:
                    pass
            if ctr.status == "exited":
                raise HarnessError(f"the {image} container exited: "
                                   f"{ctr.logs(tail=3).decode(errors='replace')}")
            time.sleep(0.5)
        raise HarnessError(f"the {image} container did not accept connections within {READY_TIMEOUT:.0f} s")
    except BaseException:
        remove_container(ctr.id)
        raise
