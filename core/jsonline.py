"""One JSON object per line, fast: the execution log's records (``core/execlog.py``), written by every
worker for every step of every job and read back by the supervisor while the run goes on.

:func:`line` encodes with orjson: 0.6 us a record in a tight loop (1.2 with a ``null`` in it: the check
below), against 3.7 us for ``json.dumps`` with a ``default``; timed in a worker's loop, ``json.dumps``
was 8.2 of a record's ~11 us (building a new encoder each call, formatting the floats). What it
writes reads back as ``json.dumps(obj, default=str)`` would have, values for values: a datetime, a
dataclass or any type neither knows goes through ``str`` (the passthrough options), a subclass of a
``str``, ``int``, ``float``, ``dict``, ``list`` or ``tuple`` is written as its base, non-string keys
become strings. Only the spacing differs (compact). Anything
orjson refuses (an integer beyond 64 bits, a float NaN it would write as ``null``) falls back to
``json.dumps``. One difference, in no record the harness writes: a plain ``Enum`` member is written as
its value (``json.dumps`` wrote ``str(member)``; a ``StrEnum`` such as ``LogEvent`` is the same either way).

:func:`loads` reads a compact line with orjson and a line in the standard encoder's spacing (``": "``:
this module's fallback, the Python contract client, an older log) with ``json.loads`` -- orjson would
read an integer beyond 64 bits as a float -- and what orjson refuses (``NaN``, ``Infinity``) with
``json.loads`` too; a torn or malformed line is a :class:`ValueError` either way.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = (orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
            | orjson.OPT_PASSTHROUGH_DATACLASS)


def _default(value: object) -> object:
    """What orjson leaves to us, as ``json.dumps(default=str)`` would write it: a subclass of ``float``
    (numpy's float64) or of ``tuple`` (a named tuple) as the number or list, anything else as ``str``."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, tuple):
        return list(value)
    return str(value)


def line(obj: dict[str, object]) -> bytes:
    """*obj* as one JSON line, newline included, as bytes."""
    try:
        data = orjson.dumps(obj, default=_default, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):  # an int beyond 64 bits, a key orjson cannot make a string
        return (json.dumps(obj, default=str) + "\n").encode()
    # Hazard: orjson writes a NaN or an infinity as null (json.dumps as NaN/Infinity, read back as the float)
    if b"null" in data and _has_nonfinite(obj):
        return (json.dumps(obj, default=str) + "\n").encode()
    return data


def _has_nonfinite(obj: dict[str, object] | list[object] | tuple[object, ...]) -> bool:
    """Whether a float in *obj* is NaN or infinite (``x - x`` is then NaN, else 0)."""
    for v in obj.values() if isinstance(obj, dict) else obj:
        kind = type(v)
        if kind is str or kind is int or v is None:  # most of a record: passed over first
            continue
        if isinstance(v, float):
            if v - v != 0:
                return True
        elif isinstance(v, dict | list | tuple) and _has_nonfinite(v):
            return True
    return False


def loads(data: bytes) -> Any:
    """One line's value; :class:`ValueError` when it is no JSON (a torn line)."""
    if b'": ' in data:  # the standard encoder's line: exact there
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # NaN, Infinity: the standard reader takes them
        return json.loads(data)
