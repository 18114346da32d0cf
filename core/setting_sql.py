"""What one SQL statement's text does to a setting: the pure half of the tenant tracking.

:func:`changes` reads a statement's text (and its parameters, as psycopg would send them) and says what
it does to the setting it is asked about and to the transaction it runs in; ``workers/tenant/track.py``
applies that to a connection's state. No connection, no server: the forms it knows are listed in that
module's docstring; anything else that names the setting in a way it cannot read says ``UNKNOWN``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

UNSET = ""  # the setting absent or reset: current_setting(name, true) says null or ''
UNKNOWN = None  # the value cannot be known client-side

_SET = re.compile(r"set\s+(?:(session|local)\s+)?(\"?[\w.$]+\"?)\s*(?:to|=)\s*(.+)", re.S)
_SET_RAW = re.compile(r"set\s+(?:(?:session|local)\s+)?\S+?\s*(?:\bto\b|=)\s*(.+)$", re.S | re.I)
_RESET = re.compile(r"reset\s+(\"?[\w.$]+\"?)\s*$")
_SET_CONFIG = re.compile(r"set_config\s*\(", re.I)
_PLACEHOLDER = re.compile(r"%(?:\((\w+)\))?[sbt]|%%")
_CAST = re.compile(r"\s*::\s*\w+\s*$")
_LITERAL = re.compile(r"[eE]?'((?:[^']|'')*)'")

Params = Sequence[object] | Mapping[str, object] | None  # a statement's parameters, as psycopg takes them


@functools.lru_cache(maxsize=4096)  # asked of every statement a worker sends: the same few texts
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
    """The statement's parameters, read in placeholder order (positional) or by key."""

    def __init__(self, text: str, params: Params) -> None:
        self.params = params
        self.where = {m.start(): m for m in _PLACEHOLDER.finditer(text) if m.group(0) != "%%"}
        self.order = sorted(self.where)

    def at(self, pos: int, m: re.Match[str]) -> tuple[bool, object]:
        p = self.params
        if m.group(1) is not None:
            return (True, p[m.group(1)]) if isinstance(p, dict) and m.group(1) in p else (False, None)
        if p is None or isinstance(p, Mapping):  # none positional (psycopg: a TypeError for a mapping)
            return False, None
        try:
            return True, p[self.order.index(pos)]
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


# changes() by (text, name, parameters): a worker sends the same few
_MEMO: dict[tuple[object, ...], tuple[tuple[str, str | None], ...]] = {}
_MEMO_MAX = 4096  # statements with the same few values thousands of times (~45 us a parse measured)
_SCALARS = (str, int, float, bool, type(None))


def _memo_key(text: str, name: str, params: Params) -> tuple[object, ...] | None:
    """A key for :data:`_MEMO`, or None when *params* are not plain values. Each value's type is in the
    key: ``True`` and ``1`` are equal and hash alike, but only one of them is a boolean here."""
    if params is None:
        return (text, name, None)
    if isinstance(params, dict):
        key = tuple((k, type(v), v) for k, v in params.items())
    elif isinstance(params, list | tuple):
        key = tuple((k, type(v), v) for k, v in enumerate(params))
    else:
        return None
    if not all(isinstance(v, _SCALARS) for _, _, v in key):
        return None
    return (text, name, type(params) is dict, key)


def changes(text: str, name: str, params: Params = None) -> list[tuple[str, str | None]]:
    """What *text* does to the setting *name* (lower case), in order: ``(scope, value)`` with scope
    ``session``, ``local`` or ``unknown``, value a string (``UNSET``: reset) or ``UNKNOWN``; and
    ``("end", "commit"|"rollback")`` or ``("savepoint"|"release"|"rollback-to", savepoint)`` for a
    transaction command. Pure: no connection needed (the module docstring gives the forms); so its
    answers for plain parameters are kept (a new list each call: the caller may change it)."""
    key = _memo_key(text, name, params)
    if key is not None and (hit := _MEMO.get(key)) is not None:
        return list(hit)
    out = _changes(text, name, params)
    if key is not None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = tuple(out)
    return out


def _changes(text: str, name: str, params: Params) -> list[tuple[str, str | None]]:
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


@functools.lru_cache(maxsize=256)  # every BEGIN and COMMIT a worker's connections send
def transaction_command(low: str) -> tuple[str, str | None] | None:
    """``("end", "commit"|"rollback")``, ``("savepoint"|"release"|"rollback-to", name)`` for a
    transaction command (*low*: lower case, whitespace collapsed), else None."""
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


@functools.lru_cache(maxsize=4096)
def calls_set_config(text: str) -> bool:
    """Whether *text* calls ``set_config`` (a composed statement's literals, ``?`` in its template, are
    then read from its full text)."""
    return "set_config" in text.lower()


_SET_NAMED = re.compile(  # SET [SESSION | LOCAL] prefix.name {TO | =}, lower-cased
    r"set\s+(?:(?:session|local)\s+)?\"?([a-z_][\w$]*(?:\.[a-z_][\w$]*)+)\"?\s*(?:to\b|=)")


@functools.lru_cache(maxsize=4096)  # asked of every statement a worker's own code sends: the same few texts
def settings_named(text: str) -> tuple[str, ...]:
    """The custom (dotted) settings *text* sets by a name it spells: ``SET [SESSION | LOCAL] name ...`` and
    ``set_config('name', ...)``, lower case, each once, in order. A name sent as a parameter or computed
    is not read (such a statement names none here); nor is ``RESET`` (it sets nothing). What
    ``core/misdeclared.py`` sets beside a design's declared ``tenant_setting``."""
    low = text.lower()
    if "set" not in low:
        return ()
    out = [m.group(1) for stmt in _split(low) if (m := _SET_NAMED.match(stmt))]
    for m in _SET_CONFIG.finditer(low):
        got = _args(low, m.end() - 1)
        if not got or not got[0]:
            continue
        lit = _LITERAL.fullmatch(_CAST.sub("", got[0][0]).strip())
        if lit and "." in lit.group(1):
            out.append(lit.group(1).replace("''", "'"))
    return tuple(dict.fromkeys(out))
