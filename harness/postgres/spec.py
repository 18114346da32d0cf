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

    def __post_init__(self):
        parse_spec(self.postgres)  # a bad one is a usage error now, not when the server starts
        if self.pg_bin and self.pg_version is not None:
            raise UsageError("a PostgreSQL binaries directory (pg_bin) and a major version (pg_version) both "
                             "pick the server: give one of them")
        # canonical: equal specs compare equal
        object.__setattr__(self, "pooler", pgbouncer.parse(self.pooler))
        object.__setattr__(self, "settings",
                           MappingProxyType({str(k): str(v) for k, v in self.settings.items()}))

    def __hash__(self) -> int:
        return hash((self.postgres, self.pg_bin, self.pg_version, self.pooler,
                     tuple(sorted(self.settings.items()))))

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
