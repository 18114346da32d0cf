"""Hypothesis's example database, selectable: a directory (the default) or Redis, so that CI
shards of one search share what each found (Hypothesis's own ``RedisExampleDatabase``)."""

from __future__ import annotations

from pathlib import Path

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from ...core.errors import HarnessError, UsageError

REDIS_TIMEOUT = 5.0  # seconds to connect and answer a PING


def open_database(spec: str) -> ExampleDatabase:
    """``redis://HOST:PORT/DB`` -> a Redis-backed database (checked with a PING: an unreachable
    server is a :class:`HarnessError`); anything else is a directory, created if missing."""
    if spec.startswith(("redis://", "rediss://", "unix://")):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError:
            raise HarnessError("--example-db redis://...: the redis package is missing; "
                               "pip install 'pg-job-chaos[redis]'") from None
        client = redis.Redis.from_url(spec, socket_timeout=REDIS_TIMEOUT,
                                      socket_connect_timeout=REDIS_TIMEOUT)
        try:
            client.ping()
        except redis.RedisError as exc:
            raise HarnessError(f"--example-db {spec}: Redis does not answer ({exc})") from None
        return RedisExampleDatabase(client)
    path = Path(spec).expanduser()
    if path.exists() and not path.is_dir():
        raise UsageError(f"--example-db {spec}: not a directory")
    return DirectoryBasedExampleDatabase(str(path))
