"""Small typed helpers for reading query results (the base layer imports no driver: a protocol).

:func:`one` is ``cur.fetchone()`` for a statement that always returns a row (a count, ``select
clock_timestamp()``, an ``insert ... returning``): the row, never ``None`` -- a missing row is a
:class:`LookupError` that says so, not a ``TypeError`` on subscripting ``None`` further on.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

Row = TypeVar("Row", covariant=True)
R = TypeVar("R")


class Fetches(Protocol[Row]):
    """A cursor (psycopg's ``Cursor``, what ``Connection.execute`` returns) as :func:`one` uses it."""

    def fetchone(self) -> Row | None: ...


def one(cur: Fetches[R]) -> R:
    """The row of a statement that always returns one; :class:`LookupError` when it returned none."""
    row = cur.fetchone()
    if row is None:
        raise LookupError("the statement returned no row (it always returns one)")
    return row
