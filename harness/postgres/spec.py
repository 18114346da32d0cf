"""What to provision: one typed value, :class:`ServerSpec`, that every caller builds from its own options
(the command line from its flags, the pytest plugin from its ``--chaos-*`` options, a test by hand) and
:func:`harness.postgres.provision` takes.

Its messages name a field in words and by its name in parentheses ("the server's binaries directory
(pg_bin)"), never a command-line flag: the caller knows which of its options set it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ...core.errors import UsageError
from . import pgbouncer


@dataclass(frozen=True)
class ServerSpec:
    """The server a run needs. Validated when made (a :class:`UsageError` naming the field); equal
    specs are the same server, so a spec can key a cache of servers."""

    postgres: str = "local"  # "local" (a throwaway server), "docker[:IMAGE]", or a libpq connection string
    pg_bin: str | None = None  # the local server's binaries directory (initdb, postgres); else discovered
    pg_version: int | None = None  # the major version: the local binaries, the image's tag, checked on a DSN
    pooler: str | None = None  # "pgbouncer[:transaction|session[:N]]" between the workers and the server
    # Server settings over the throwaway defaults (harness.postgres.local.SERVER_SETTINGS): what the
    # run's faults declare they need (harness.session.server_settings), e.g. DURABLE_SETTINGS for a
    # restart. A local or Docker server starts with them; any server must report them, or
    # provisioning fails.
    settings: Mapping[str, str] = field(default_factory=dict)
    # "async" or "sync": a primary and a streaming standby of the local server's (harness.postgres.replica),
    # reached by a multi-host DSN; None: one server.
    replica: str | None = None

    def __post_init__(self):
        parse_spec(self.postgres)  # a bad one is a usage error now, not when the server starts
        if self.pg_bin and self.pg_version is not None:
            raise UsageError("a PostgreSQL binaries directory (pg_bin) and a major version (pg_version) both "
                             "pick the server: give one of them")
        _check_replica(self)
        # canonical: equal specs compare equal
        object.__setattr__(self, "pooler", pgbouncer.parse(self.pooler))
        object.__setattr__(self, "settings",
                           MappingProxyType({str(k): str(v) for k, v in self.settings.items()}))

    def __hash__(self) -> int:
        return hash((self.postgres, self.pg_bin, self.pg_version, self.pooler,
                     tuple(sorted(self.settings.items())), self.replica))

    @property
    def kind(self) -> str:
        """``local``, ``docker`` or ``dsn``."""
        return parse_spec(self.postgres)[0]

    @property
    def target(self) -> str | None:
        """The Docker image (None: the default) or the connection string; None for the local server."""
        return parse_spec(self.postgres)[1]

    def with_settings(self, settings: Mapping[str, str] | None) -> ServerSpec:
        """This spec with *settings* over its own (None: as it is)."""
        if not settings:
            return self
        return dataclasses.replace(self, settings={**self.settings, **settings})


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``local`` / ``docker[:IMAGE]`` / a DSN -> (kind, argument). Anything else is a usage error."""
    if spec in ("", "local"):
        return "local", None
    if spec == "docker" or spec.startswith("docker:"):
        return "docker", spec.partition(":")[2] or None
    if "://" in spec or "=" in spec:
        return "dsn", spec
    raise UsageError(f"the server (postgres) {spec!r}: expected local, docker[:IMAGE] or a connection string "
                     "(postgresql://...)")


REPLICA_MODES = ("async", "sync")


def _check_replica(spec: ServerSpec) -> None:
    """The replicated back end combines with the local server only (it starts both nodes, rewinds and
    promotes them), PostgreSQL 16 or later (what it was measured on), and no pooler (one pooler in
    front of a pair would pin one node: the multi-host DSN could not follow a promotion)."""
    if spec.replica is None:
        return
    if spec.replica not in REPLICA_MODES:
        raise UsageError(f"the replicated back end (replica) {spec.replica!r}: expected async or sync")
    kind = parse_spec(spec.postgres)[0]
    if kind != "local":
        raise UsageError(f"a replicated back end (replica) needs the local server (postgres local): the "
                         f"harness starts, promotes and rewinds both nodes, which it cannot do on {kind}")
    if spec.pooler:
        raise UsageError("a replicated back end (replica) takes no pooler (pooler): PgBouncer in front "
                         "would pin one node, and clients could not follow a promotion")
    if spec.pg_version is not None and spec.pg_version < 16:
        raise UsageError(f"a replicated back end (replica) needs PostgreSQL 16 or later (pg_version "
                         f"{spec.pg_version}): it was measured on 17 only")
