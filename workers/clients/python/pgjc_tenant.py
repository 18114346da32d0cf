"""The tenant setting tracked client-side for the contract's Python client: a copy of ``core/setting_sql.py``
and ``workers/tenant/track.py`` (their docstrings state the contract; this client runs where pg-job-chaos is
not installed). ``tests/unit/test_tenant_track.py`` checks that the copy answers as the originals do."""

from __future__ import annotations

import re

from psycopg import pq, sql

UNSET = ""  # the setting absent or reset: current_setting(name, true) says null or ''
UNKNOWN = None  # the value cannot be known client-side

_SET = re.compile(r"set\s+(?:(session|local)\s+)?(\"?[\w.$]+\"?)\s*(?:to|=)\s*(.+)", re.S)
_SET_RAW = re.compile(r"set\s+(?:(?:session|local)\s+)?\S+?\s*(?:\bto\b|=)\s*(.+)$", re.S | re.I)
_RESET = re.compile(r"reset\s+(\"?[\w.$]+\"?)\s*$")
_SET_CONFIG = re.compile(r"set_config\s*\(", re.I)
_PLACEHOLDER = re.compile(r"%(?:\((\w+)\))?[sbt]|%%")
_CAST = re.compile(r"\s*::\s*\w+\s*$")
_LITERAL = re.compile(r"[eE]?'((?:[^']|'')*)'")


def mentions(text: str, name: str) -> bool:
    low = text.lower()
    return name in low or "set_config" in low or "reset" in low or "discard" in low or low.lstrip()[:3] in (
        "com", "rol", "end", "abo", "sav", "rel")


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.split(";") if p.strip()]


def _args(text: str, start: int) -> tuple[list[str], int] | None:
    depth = 0
    quote = False
    out = []
    begin = start + 1
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
        args = got[0]
        pos = m.end()
        values = []
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
    out: list[tuple[str, str | None]] = []
    # With parameters psycopg sends one statement (the extended protocol): never split it.
    for stmt in ([text.strip()] if params is not None else _split(text)):
        ps = _Params(stmt, params)
        low = " ".join(stmt.lower().split())
        tx = transaction_command(low)
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


def transaction_command(low: str) -> tuple[str, str | None] | None:
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


_NOT = object()  # no change in the current transaction
_ATTR = "_pgjc_tenant"  # where a connection keeps its State
_IN_BLOCK = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)


class State:
    __slots__ = ("base", "session", "local", "savepoints")

    def __init__(self) -> None:
        self.base: str | None = UNSET
        self.session: object = _NOT
        self.local: object = _NOT
        self.savepoints: list[tuple[str, object, object]] = []

    def value(self) -> str | None:
        for v in (self.local, self.session):
            if v is not _NOT:
                return v  # type: ignore[return-value]
        return self.base

    def pending(self) -> bool:
        return self.session is not _NOT or self.local is not _NOT or bool(self.savepoints)

    def change(self, scope: str, value: str | None, in_block: bool) -> None:
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


def in_force(conn) -> str | None:
    st = getattr(conn, _ATTR, None)
    return UNSET if st is None else st.value()


def text_of(query, conn) -> str | None:
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
    st = getattr(conn, _ATTR, None) or State()
    setattr(conn, _ATTR, st)
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
    if getattr(conn, _ATTR, None) is None:
        return  # nothing ever changed on this connection: nothing to end
    text = text_of(command, conn)
    tx = transaction_command(" ".join(text.lower().split())) if text else None
    if tx is not None:
        applied(conn, [tx])
    else:
        settle(conn)


def settle(conn, st: State | None = None, status=None) -> None:
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
