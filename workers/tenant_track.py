"""The tenant setting in force on each psycopg connection of a worker process, tracked client-side.

Mechanism: every statement and every transaction command the process sends through psycopg passes
here (``workers/statements.py`` wraps ``Cursor.execute`` and ``executemany``, their async twins, and
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
``Cursor.stream`` / ``copy`` statements (they do not go through ``execute``).
"""

from __future__ import annotations

import re

from psycopg import pq, sql

UNSET = ""  # the setting absent or reset: current_setting(name, true) says null or ''
UNKNOWN = None  # the value cannot be known client-side
_NOT = object()  # no change in the current transaction
_ATTR = "_pgjc_tenant"  # where a connection keeps its State
_IN_BLOCK = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)

_SET = re.compile(r"set\s+(?:(session|local)\s+)?(\"?[\w.$]+\"?)\s*(?:to|=)\s*(.+)", re.S)
_SET_RAW = re.compile(r"set\s+(?:(?:session|local)\s+)?\S+?\s*(?:\bto\b|=)\s*(.+)$", re.S | re.I)
_RESET = re.compile(r"reset\s+(\"?[\w.$]+\"?)\s*$")
_SET_CONFIG = re.compile(r"set_config\s*\(", re.I)
_PLACEHOLDER = re.compile(r"%(?:\((\w+)\))?[sbt]|%%")
_CAST = re.compile(r"\s*::\s*\w+\s*$")
_LITERAL = re.compile(r"[eE]?'((?:[^']|'')*)'")


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
            self.session, self.local = value, _NOT

    def end(self, committed: bool | None) -> None:
        """The transaction ended: committed, rolled back, or (None) in a way not seen."""
        if committed is None and self.pending():
            self.base = UNKNOWN if self.value() != self.base or self.session is not _NOT else self.base
        elif committed and self.session is not _NOT:
            self.base = self.session  # type: ignore[assignment]
        self.session, self.local, self.savepoints = _NOT, _NOT, []

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


def mentions(text: str, name: str) -> bool:
    """Whether *text* may change the setting or end a transaction (the cheap test before parsing)."""
    low = text.lower()
    return name in low or "set_config" in low or "reset" in low or "discard" in low or low.lstrip()[:3] in (
        "com", "rol", "end", "abo", "sav", "rel")


def _split(text: str) -> list[str]:
    """Statements of a multi-statement string (a ``;`` inside a literal splits it wrongly: then the
    parts are unrecognised, or a set_config's arguments unreadable, which says unknown)."""
    return [p.strip() for p in text.split(";") if p.strip()]


def _args(text: str, start: int) -> tuple[list[str], int] | None:
    """The top-level, comma-separated arguments of the call whose ``(`` is at *start*, and where it
    ends; None when unbalanced."""
    depth, quote, out, begin = 0, False, [], start + 1
    for i in range(start, len(text)):
        c = text[i]
        if c == "'":
            quote = not quote
        elif quote:
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                out.append(text[begin:i].strip())
                return out, i
        elif c == "," and depth == 1:
            out.append(text[begin:i].strip())
            begin = i + 1
    return None


class _Params:
    """The statement's parameters, read in placeholder order (positional) or by key."""

    def __init__(self, text: str, params) -> None:
        self.params = params
        self.where = {m.start(): m for m in _PLACEHOLDER.finditer(text) if m.group(0) != "%%"}
        self.order = sorted(self.where)

    def at(self, pos: int, m) -> tuple[bool, object]:
        if m.group(1) is not None:
            p = self.params
            return (True, p[m.group(1)]) if isinstance(p, dict) and m.group(1) in p else (False, None)
        try:
            return True, self.params[self.order.index(pos)]
        except (TypeError, IndexError, KeyError, ValueError):
            return False, None


def _arg(text: str, offset: int, params: _Params) -> tuple[bool, object]:
    """(known, value) of one set_config argument: a literal, a parameter, true/false/null."""
    a = _CAST.sub("", text).strip()
    m = _LITERAL.fullmatch(a)
    if m:
        return True, m.group(1).replace("''", "'")
    low = a.lower()
    if low in ("true", "false"):
        return True, low == "true"
    if low == "null":
        return True, None
    p = _PLACEHOLDER.fullmatch(a)
    if p:
        return params.at(offset + (len(text) - len(text.lstrip())), p)
    if re.fullmatch(r"-?\d+", a):
        return True, a
    return False, None


def _truth(v: object) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("t", "true", "on", "yes", "1", "f", "false", "off", "no", "0"):
        return v.lower() in ("t", "true", "on", "yes", "1")
    return None


def _set_configs(text: str, name: str, params: _Params) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for m in _SET_CONFIG.finditer(text):
        got = _args(text, m.end() - 1)
        if got is None or len(got[0]) != 3:
            out.append(("unknown", UNKNOWN))
            continue
        args, pos, values = got[0], m.end(), []
        for a in args:  # each argument's offset in *text*, for its positional placeholder
            off = text.index(a, pos) if a else pos
            values.append(_arg(a, off, params))
            pos = off + len(a)
        (name_known, setting), (value_known, value), (local_known, local) = values
        if name_known and (not isinstance(setting, str) or setting.lower() != name):
            continue  # another setting
        scope = {True: "local", False: "session"}.get(_truth(local)) if local_known else None  # type: ignore[arg-type]
        if not name_known or scope is None:
            out.append(("unknown", UNKNOWN))
        else:
            out.append((scope, (UNSET if value is None else str(value)) if value_known else UNKNOWN))
    return out


def changes(text: str, name: str, params=None) -> list[tuple[str, str | None]]:
    """What *text* does to the setting *name* (lower case), in order: ``(scope, value)`` with scope
    ``session``, ``local`` or ``unknown``, value a string (``UNSET``: reset) or ``UNKNOWN``; and
    ``("end", "commit"|"rollback")`` or ``("savepoint"|"release"|"rollback-to", savepoint)`` for a
    transaction command. Pure: no connection needed (the module docstring gives the forms)."""
    out: list[tuple[str, str | None]] = []
    # With parameters psycopg sends one statement (the extended protocol): never split it.
    for stmt in ([text.strip()] if params is not None else _split(text)):
        ps = _Params(stmt, params)
        low = " ".join(stmt.lower().split())
        tx = _transaction(low)
        if tx is not None:
            out.append(tx)
            continue
        m = _SET.fullmatch(low)
        if m:
            if m.group(2).strip('"') == name:
                out.append((m.group(1) or "session", _set_value(stmt, m.group(3))))
            continue
        m = _RESET.fullmatch(low)
        if m:
            if m.group(1).strip('"') in (name, "all"):
                out.append(("session", UNSET))
            continue
        if low == "discard all":
            out.append(("session", UNSET))
            continue
        out.extend(_set_configs(stmt, name, ps))
    return out


def _set_value(stmt: str, lowered: str) -> str | None:
    """The value of ``SET name TO value``: a literal keeps its case, so it is read from *stmt*."""
    v = lowered.strip()
    if v == "default":
        return UNSET
    m = _SET_RAW.match(stmt.strip())
    raw = m.group(1).strip() if m else v
    lit = _LITERAL.fullmatch(raw)
    if lit:
        return lit.group(1).replace("''", "'")
    if re.fullmatch(r"[\w.$-]+", raw):
        return raw.lower() if not raw.lstrip("-").isdigit() else raw
    return UNKNOWN  # a list, or something else SET takes


def _transaction(low: str) -> tuple[str, str | None] | None:
    words = low.split()
    if not words:
        return None
    first = words[0]
    if first in ("commit", "end") and len(words) <= 2:
        return ("end", "commit")
    if first in ("rollback", "abort"):
        if len(words) >= 3 and words[1] == "to":
            return ("rollback-to", words[-1].strip('"'))
        return ("end", "rollback")
    if first == "savepoint" and len(words) == 2:
        return ("savepoint", words[1].strip('"'))
    if first == "release":
        return ("release", words[-1].strip('"'))
    return None


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
    for kind, arg in found:
        if pipeline and (kind not in ("end", "savepoint", "release", "rollback-to") or st.pending()):
            st.base, st.session, st.local, st.savepoints = UNKNOWN, _NOT, _NOT, []
            return
        if kind == "end":
            st.end(arg == "commit")
        elif kind in ("savepoint", "release"):
            st.savepoint(kind, arg or "")
        elif kind == "rollback-to":
            st.savepoint("rollback", arg or "")
        else:
            st.change(kind, arg, in_block)
    settle(conn, st, status)


def command(conn, command) -> None:
    """A transaction command the connection sent itself (psycopg's ``_exec_command``) succeeded."""
    if getattr(conn, _ATTR, None) is None:
        return  # nothing ever changed on this connection: nothing to end
    text = text_of(command, conn)
    tx = _transaction(" ".join(text.lower().split())) if text else None
    if tx is not None:
        applied(conn, [tx])
    else:
        settle(conn)


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


