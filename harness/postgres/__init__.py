"""PostgreSQL back ends behind one interface: :func:`provision`, given a :class:`ServerSpec`.

``local`` (default) starts a throwaway server from discovered binaries; a connection string
(``postgresql://...`` or any libpq DSN) uses an existing server; ``docker[:IMAGE]`` starts a
container. In every case the harness works in a database of its own with a worker role of its own,
and removes all of it at exit. Messages name the spec's fields, never a caller's option.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...core.cleanup import Cleanup
from ...core.db import one
from ...core.errors import HarnessError
from ...core.server import Replicated, Restartable
from ..janitor import Janitor
from . import dataset as db
from . import dsn as dsn_backend
from . import pgbouncer
from .spec import ServerSpec, parse_spec

if TYPE_CHECKING:
    from .docker import DockerServer
    from .local import LocalServer
    from .replica import Pair

__all__ = ["Database", "ServerSpec", "provision", "parse_spec"]

# Reported in every history: what decides whether an acknowledged commit survives a crash.
REPORTED_SETTINGS = ("fsync", "synchronous_commit", "full_page_writes")

log = logging.getLogger("pgjc.postgres")


@dataclass(frozen=True)
class Database:
    """Where a run happens. ``admin_dsn`` owns the tables; ``worker_dsn`` is the ordinary role."""

    admin_dsn: str
    worker_dsn: str
    database: str
    worker_role: str
    server: str  # one line for the user: what runs where
    server_version: int  # server_version_num, e.g. 171000
    janitor: Janitor | None = None
    # the server's durability settings, as it reports them
    settings: dict[str, str] = field(default_factory=dict)
    pooler: str | None = None  # "pgbouncer:transaction" when worker_dsn goes through a pooler
    direct_worker_dsn: str = ""  # the worker role straight to the server (== worker_dsn without a pooler)
    # The back end's capabilities (core/server.py), None where it lacks one. control: the local server
    # (or the replicated pair) the restart fault stops and starts; replica: the replicated back end's
    # pair (harness.postgres.replica.Pair), settled before each run, which the failover faults drive.
    control: Restartable | None = None
    spec: ServerSpec | None = None  # what it was provisioned from
    replica: Replicated | None = None

    @property
    def major(self) -> int:
        return self.server_version // 10000

    def environment(self) -> dict:
        """What a history and a saved schedule record about where a run happened."""
        env = {"pg_version": self.major, "server": self.server, "settings": dict(self.settings),
               "pooler": self.pooler}
        if self.replica is not None:
            env["replica"] = self.replica.mode
        return env


@contextlib.contextmanager
def provision(spec: ServerSpec | str = "local", *, progress=None, **fields):
    """Yield a :class:`Database` with the article's schema and data, on the server *spec* describes;
    remove everything afterwards. *spec* is a :class:`ServerSpec`, or for short its ``postgres``
    field with the others as keywords (``provision(pooler="pgbouncer")``). *progress*
    (:mod:`harness.progress`) hears about long first-time work (copying the server).

    ``pg_version`` (a major version) picks the local server's binaries, a Docker image's tag, and is
    checked against a DSN's server. Raises :class:`HarnessError` when the server cannot be started
    or reached, is not that version, or does not run on ``settings``. ``pooler`` puts PgBouncer
    between the workers and the server: ``worker_dsn`` goes through it, ``admin_dsn`` never does. A
    cleanup step that fails after an earlier error is logged; the earlier error is the one raised.
    """
    if not isinstance(spec, ServerSpec):
        spec = ServerSpec(spec, **fields)
    elif fields:
        raise TypeError(f"provision: a ServerSpec and its fields given apart ({', '.join(fields)}): give one")
    kind = spec.kind
    arg = spec.target
    pooler = spec.pooler
    if pooler is not None:
        pgbouncer.find()  # not installed: say so before a server is started
    janitor = Janitor()
    with Cleanup(log) as cleanup:
        cleanup.push("closing the janitor", janitor.close)
        server: LocalServer | DockerServer | Pair | None
        control: Restartable | None = None  # what the back end can do (core/server.py)
        pair: Replicated | None = None
        if kind == "local" and spec.replica is not None:
            from . import replica

            started = replica.start(spec.replica, pg_bin=spec.pg_bin, pg_version=spec.pg_version,
                                    janitor=janitor, extra=dict(spec.settings), progress=progress)
            server = started
            control = started  # the restart fault's stop and start are a failover's
            pair = started
        elif kind == "local":
            from . import local

            alone = local.start(pg_bin=spec.pg_bin, pg_version=spec.pg_version, janitor=janitor,
                                settings=dict(spec.settings), progress=progress)
            server = alone
            control = alone
        elif kind == "docker":
            from . import docker

            image = arg or (f"postgres:{spec.pg_version}" if spec.pg_version is not None else None)
            server = docker.start(image, janitor=janitor, settings=dict(spec.settings))
        else:
            server = None
        if server is not None:
            cleanup.push("stopping the server", lambda: server.stop(janitor))
            base_dsn = server.admin_dsn
            where = server.describe()
        else:
            assert arg is not None  # parse_spec: a connection string is its own argument
            base_dsn = arg
            where = f"PostgreSQL at {dsn_backend.where(arg)}"
        suffix = secrets.token_hex(4)
        database = f"pgjc_{suffix}"
        role = f"pgjc_{suffix}_worker"
        password = secrets.token_hex(16)
        # Registered before it exists: dropping what does not exist is harmless, missing it is not.
        drop_key = janitor.register("dropdb", dsn=base_dsn, database=database, role=role)

        def drop() -> None:
            try:
                dsn_backend.drop_database(base_dsn, database, role)
            except HarnessError as exc:  # the run's verdict stands; say what is left, and where
                log.warning("could not drop database %s and role %s: %s", database, role, exc)
                return
            janitor.forget(drop_key)  # only once it is gone: otherwise the janitor still drops it

        dsn_backend.create_database(base_dsn, database, role, password)
        cleanup.push(f"dropping database {database}", drop)
        admin_dsn = dsn_backend.with_db(base_dsn, dbname=database)
        worker_dsn = dsn_backend.with_db(base_dsn, dbname=database, user=role, password=password)
        with dsn_backend.connect_admin(admin_dsn) as conn:
            version = conn.info.server_version
            reported = {k: one(conn.execute("select current_setting(%s)", (k,)))[0]
                        for k in dict.fromkeys((*REPORTED_SETTINGS, *spec.settings))}
        if spec.pg_version is not None and version // 10000 != spec.pg_version:
            raise HarnessError(f"the server at {where} is PostgreSQL {version // 10000}, not the major "
                               f"version asked for (pg_version {spec.pg_version})")
        unmet = [f"{k}={v} (it runs {reported[k]})" for k, v in spec.settings.items() if reported[k] != v]
        if unmet:
            raise HarnessError(f"the server at {where} does not run on the settings the run needs "
                               f"(settings): {', '.join(unmet)}")
        db.install(admin_dsn, database=database, worker_role=role)  # after the checks: the data takes a while
        direct = worker_dsn
        if pooler is not None:
            bouncer = pgbouncer.start(pooler, server_dsn=admin_dsn, worker_dsn=direct, janitor=janitor)
            cleanup.push("stopping PgBouncer", lambda: bouncer.stop(janitor))  # before the drop: LIFO
            worker_dsn = bouncer.dsn(direct)
            where = f"{where}; workers through {bouncer.describe()}"
        yield Database(admin_dsn, worker_dsn, database, role, where, version, janitor, reported, pooler,
                       direct, control=control, spec=spec, replica=pair)
