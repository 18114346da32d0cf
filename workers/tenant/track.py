"""The tenant setting in force on each psycopg connection of a worker process, tracked client-side.

Mechanism: every statement and every transaction command the process sends through psycopg passes
here (``workers/body/statements.py`` wraps ``Cursor.execute`` and ``executemany``, their async twins, and
the connection's own commands -- BEGIN, COMMIT, ROLLBACK, savepoints -- that ``conn.commit()``,
``conn.rollback()`` and ``conn.transaction()`` send), and the setting is worked out from them, per
connection, without sending anything. Chosen over reading the setting beside each statement, which
cannot be done where it matters: in a transaction in error any statement fails (and a read there
would change the user's error), in pipeline mode an extra statement changes the pipeline's
results, and a read costs a round trip per statement. Here the cost of an ordinary statement is a
lower-casing and five substring tests.

What changes the setting (*name*, the design's ``tenant_setting``), applied once the statement
succeeded (a statement that raised changed nothing; its transaction is in error and will roll back):

* ``SET [SESSION] name {TO|=} value``, ``RESET name``, ``RESET ALL``, ``DISCARD ALL``, and
  ``set_config('name', value, false)``: at session level -- undone if the transaction they ran in
  rolls back (or a savepoint after which they ran is rolled back to), kept when it commits;
* ``SET LOCAL name ...`` and ``set_config('name', value, true)``: until the transaction ends, whichever
  way (outside a transaction block, in autocommit, they do nothing);
* the arguments of ``set_config`` may be literals, ``%s`` / ``%(key)s`` parameters (their values are
  taken), ``null`` (a reset), with or without a cast. A computed one (``(select ...)``, a function
  call) makes the value **unknown** from then on until a known change replaces it; so does a
  setting name that is itself computed, or a change sent in pipeline mode (an earlier error in the
  pipeline can skip it, and an aborted implicit transaction undoes the segment's session changes).

A transaction that ends in a way no command here showed (a ``COMMIT`` inside a multi-statement string
is parsed; a server-side end is not) leaves the value unknown where it had changed in it. A new
connection starts unset. Not seen: a change made by server-side code the statement only calls (a
function of the user's, a ``SET`` clause of a function), a per-role or per-database default
(``ALTER ROLE ... SET``), a connection string's ``options=-c name=...``, ``ServerCursor`` and
``Cursor.stream`` / ``copy`` statements (they do not go through ``execute``). The reading of a
statement's text is ``core/setting_sql.py`` (pure: tests/unit/test_tenant_track.py); the state per
connection, and what psycopg tells of it (its transaction status, pipeline mode), are here.
"""

from __future__ import annotations

import functools

from psycopg import pq, sql

from ...core.setting_sql import UNKNOWN, UNSET, changes, mentions, transaction_command

__all__ = ["UNKNOWN", "UNSET", "State", "applied", "changes", "command", "in_force", "literals_only",
           "mentions", "set_here", "settle", "state", "statement_changes", "text_of"]

_NOT = object()  # no change in the current transaction
_ATTR = "_pgjc_tenant"  # where a connection keeps its State
_IN_BLOCK = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)


class State:
    """One connection's setting: ``base`` as of its transaction's start, and the transaction's own
    session and local changes (``_NOT``: none), with a snapshot per open savepoint."""

    __slots__ = ("base", "session", "local", "savepoints")

    def __init__(self) -> None:
        self.base: str | None = UNSET
        self.session: object = _NOT
        self.local: object = _NOT
        self.savepoints: list[tuple[str, object, object]] = []

    def value(self) -> str | None:
        """The value in force now: a string (``UNSET``: none) or ``UNKNOWN``."""
        for v in (self.local, self.session):
            if v is not _NOT:
                return v  # type: ignore[return-value]
        return self.base

    def pending(self) -> bool:
        return self.session is not _NOT or self.local is not _NOT or bool(self.savepoints)

    def change(self, scope: str, value: str | None, in_block: bool) -> None:
        """Apply a change of *scope* ``session``, ``local`` or ``unknown`` (either) that succeeded."""
        if not in_block:  # its own implicit transaction, committed: a local change did nothing
            if scope != "local":
                self.base = value if scope == "session" else UNKNOWN
            return
        if scope == "local":
            self.local = value
        else:  # a session change replaces a local one of the same transaction (guc.c: GUC_SET)
            self.session = value
            self.local = _NOT

    def end(self, committed: bool | None) -> None:
        """The transaction ended: committed, rolled back, or (None) in a way not seen."""
        if committed is None and self.pending():
            self.base = UNKNOWN if self.value() != self.base or self.session is not _NOT else self.base
        elif committed and self.session is not _NOT:
            self.base = self.session  # type: ignore[assignment]
        self.session = _NOT
        self.local = _NOT
        self.savepoints = []

    def savepoint(self, verb: str, name: str) -> None:
        if verb == "savepoint":
            self.savepoints.append((name, self.session, self.local))
            return
        names = [n for n, _, _ in self.savepoints]
        if name not in names:
            return
        i = len(names) - 1 - names[::-1].index(name)
        if verb == "rollback":  # back to the snapshot; the savepoint itself stays
            _, self.session, self.local = self.savepoints[i]
            del self.savepoints[i + 1:]
        else:  # release: it and those after it go, their changes kept
            del self.savepoints[i:]


def state(conn) -> State:
    st = getattr(conn, _ATTR, None)
    if st is None:
        st = State()
        setattr(conn, _ATTR, st)
    return st


def in_force(conn) -> str | None:
    """The setting's value on *conn* now (``UNSET``: none; ``UNKNOWN``: cannot be known)."""
    st = getattr(conn, _ATTR, None)
    return UNSET if st is None else st.value()


def set_here(conn) -> bool:
    """Whether the value in force on *conn* was set in its current transaction (a transaction pooler
    keeps one server session for a transaction, not between them)."""
    st = getattr(conn, _ATTR, None)
    return st is not None and (st.local is not _NOT or st.session is not _NOT)


def text_of(query, conn) -> str | None:
    """A statement's full text (a composed one rendered for *conn*), or None when it is unreadable."""
    if isinstance(query, str):
        return query
    if isinstance(query, bytes):
        return query.decode(errors="replace")
    if isinstance(query, sql.Composable):
        try:
            return query.as_string(conn)
        except Exception:  # noqa: BLE001 - unreadable: treated as changing nothing it can name
            return None
    return None


def applied(conn, found: list[tuple[str, str | None]]) -> None:
    """Apply *found* (:func:`changes` of a statement or command that succeeded on *conn*)."""
    st = state(conn)
    try:
        status = conn.pgconn.transaction_status
        pipeline = conn._pipeline is not None  # noqa: SLF001 - psycopg keeps no public flag for it
    except Exception:  # noqa: BLE001 - a closed connection: nothing more runs on it
        return
    in_block = status in _IN_BLOCK
    ends = [i for i, (kind, _) in enumerate(found) if kind == "end"]  # a change before one was in its block
    for i, (kind, arg) in enumerate(found):
        if pipeline and (kind not in ("end", "savepoint", "release", "rollback-to") or st.pending()):
            st.base = UNKNOWN
            st.session = _NOT
            st.local = _NOT
            st.savepoints = []
            return
        if kind == "end":
            st.end(arg == "commit")
        elif kind in ("savepoint", "release"):
            st.savepoint(kind, arg or "")
        elif kind == "rollback-to":
            st.savepoint("rollback", arg or "")
        else:
            st.change(kind, arg, in_block or bool(ends and i < ends[-1]))
    settle(conn, st, status)


def command(conn, command) -> None:
    """A transaction command the connection sent itself (psycopg's ``_exec_command``) succeeded."""
    if getattr(conn, _ATTR, None) is None:
        return  # nothing ever changed on this connection: nothing to end
    tx = _command(command) if isinstance(command, bytes) else _command_of(text_of(command, conn))
    if tx is not None:
        applied(conn, [tx])
    else:
        settle(conn)


def _command_of(text: str | None) -> tuple[str, str | None] | None:
    return transaction_command(" ".join(text.lower().split())) if text else None


@functools.lru_cache(maxsize=256)  # psycopg's own few: BEGIN, COMMIT, ROLLBACK, SAVEPOINT "_pg3_1"...
def _command(command: bytes) -> tuple[str, str | None] | None:
    return _command_of(command.decode(errors="replace"))


def settle(conn, st: State | None = None, status=None) -> None:
    """After a statement: a transaction that ended unseen (the connection idle with changes pending)."""
    st = st if st is not None else getattr(conn, _ATTR, None)
    if st is None or not st.pending():
        return
    if status is None:
        try:
            status = conn.pgconn.transaction_status
        except Exception:  # noqa: BLE001
            return
    if status == pq.TransactionStatus.IDLE:
        st.end(None)


def statement_changes(name: str, conn, query, text: str, params, many: bool) -> list | None:
    """What a statement (*query*, *text* its ``statements._text``: each literal a ``?``) sent on *conn*
    does to the setting *name* (lower case): None for nothing; the cheap test first."""
    if not mentions(text, name):
        return None
    if literals_only(query) and not changes(text, name, None if many else params):
        return None  # no literal's value can make it change the setting: the template's answer, kept
    full = text if isinstance(query, str) else text_of(query, conn)
    if full is None:
        return None
    if many:  # Hazard: a generator of parameters is the user's to consume: its changes are unknown
        if not isinstance(params, list | tuple):
            return changes(full, name) or None  # its placeholders unread: unknown values
        return [c for p in params for c in changes(full, name, p)] or None
    return changes(full, name, params) or None


_PLAIN = (int, float, bool, type(None))


def literals_only(query) -> bool:
    """Whether *query* is composed of SQL and literals only, none of them a string with a ``;``.

    Then its text with each literal a ``?`` (``statements._text``) changes the setting if any rendering
    of it can: a ``?`` where a ``set_config`` argument stands is unknown to the parser, so a call that
    may be about the setting is never empty, and a call about another setting is empty whatever its
    value. A ``;`` in a literal would split the rendered text where the template has none. So the body's
    inherited-tenant read, a new literal per execution, is parsed once (~14 us a statement saved, of the
    rendering and parsing it took)."""
    if not isinstance(query, sql.Composed):
        return False
    for part in query._obj:  # noqa: SLF001 - its parts
        if isinstance(part, sql.Literal):
            v = part._obj  # noqa: SLF001 - its value
            if not (isinstance(v, _PLAIN) or isinstance(v, str) and ";" not in v):
                return False
        elif not (isinstance(part, sql.SQL) or literals_only(part)):
            return False
    return True
