"""The ``dsn`` back end: a server the user already runs.

We create a database of our own (``pgjc_<random>``) and a worker role for it, do everything
inside that database, and drop both at exit -- or the janitor does, if we are killed. No other
database is read or written: the only statements outside ours are CREATE/DROP DATABASE and
CREATE/DROP ROLE for the names we made.
"""

from __future__ import annotations

import psycopg
from psycopg import conninfo, sql

from ...core.errors import HarnessError

CONNECT_TIMEOUT = 5  # seconds; an unreachable server must fail fast


def where(dsn: str) -> str:
    """host:port/dbname of a DSN, without its password, for messages."""
    try:
        p = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise HarnessError(f"not a valid PostgreSQL connection string: {exc}") from None
    return f"{p.get('host', 'localhost')}:{p.get('port', 5432)}/{p.get('dbname', '')}"


def connect_admin(dsn: str) -> psycopg.Connection:
    """An autocommit connection to the user's server; :class:`HarnessError` when unreachable."""
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HarnessError(f"cannot connect to PostgreSQL at {where(dsn)}: {first}") from None


def create_database(dsn: str, database: str, role: str, password: str) -> None:
    """CREATE DATABASE and CREATE ROLE, or :class:`HarnessError` saying which privilege is missing."""
    from .dataset import create_role

    with connect_admin(dsn) as conn:
        try:
            conn.execute(sql.SQL("create database {}").format(sql.Identifier(database)))
        except psycopg.Error as exc:
            raise HarnessError(f"the role in the DSN cannot create a database at {where(dsn)}: "
                               f"{exc}") from None
        try:
            create_role(conn, role, password)
        except psycopg.Error as exc:
            conn.execute(sql.SQL("drop database if exists {}").format(sql.Identifier(database)))
            raise HarnessError(f"the role in the DSN cannot create a role at {where(dsn)}: {exc}") from None


def drop_database(dsn: str, database: str, role: str | None) -> None:
    """Drop our database (ending its sessions first) and our role. Safe to call twice."""
    with connect_admin(dsn) as conn:
        conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(database)))
        if role:
            conn.execute(sql.SQL("drop role if exists {}").format(sql.Identifier(role)))


def with_db(dsn: str, **fields) -> str:
    """*dsn* with some of its fields replaced (dbname, user, password)."""
    return conninfo.make_conninfo(dsn, **fields)
