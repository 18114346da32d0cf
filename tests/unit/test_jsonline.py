"""``core/jsonline.py``: a record reads back as it did when ``json.dumps(obj, default=str)`` wrote it."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import math
import os
import pathlib

import pytest

from pg_job_chaos.core import jsonline
from pg_job_chaos.core.events import LogEvent
from pg_job_chaos.core.execlog import ExecLog, count_started, parse_lines


@dataclasses.dataclass
class _Point:
    x: int = 1


class _Name(str):
    pass


class _Int(int):
    pass


class _Float(float):
    pass


_Pair = collections.namedtuple("_Pair", "x y")


CASES = [
    {"event": LogEvent.FINISHED, "job": 3, "attempt": 1, "points": ["before-tenant", "mid-work"]},
    {"t": 0.1, "wall": 1796574313.0156298, "tiny": 1e-7, "huge": 1e22, "neg": -0.0},
    {"when": datetime.datetime(2026, 12, 6, 1, 2, 3, tzinfo=datetime.UTC), "day": datetime.date(2026, 1, 2),
     "at": datetime.time(1, 2)},
    {"dataclass": _Point(), "path": pathlib.Path("/x"), "set": {1}, "bytes": b"xy", "sub": _Name("abc")},
    {"int": _Int(7), "float": _Float(1.5), "pair": _Pair(1, "a"), "ordered": collections.OrderedDict(b=2)},
    {"float subclass": _Float("nan")},
    {1: "int key", None: "none key", False: "bool key", 2.5: "float key"},
    {"text": 'é\u2028"\\\n\t', "nested": {"a": [{"b": (1, "c")}]}, "none": None, "flag": False},
    {"beyond 64 bits": -(2**70)},  # orjson refuses it: written by json, read back as json would
    {"nan": float("nan"), "inf": [1.0, float("-inf")]},  # orjson would write null: written by json
]


def _same(a, b) -> bool:
    """Equal, a NaN equal to a NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("record", CASES, ids=range(len(CASES)))
def test_a_record_reads_back_as_the_standard_encoder_wrote_it(record):
    data = jsonline.line(record)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    want = json.loads(json.dumps(record, default=str))
    assert _same(jsonline.loads(data), want)
    assert _same(json.loads(data), want)  # any JSON reader takes it (the clients in other languages too)


def test_a_torn_line_is_a_value_error_and_nan_written_elsewhere_is_read():
    with pytest.raises(ValueError):
        jsonline.loads(b'{"event":"started","job":')
    assert math.isnan(jsonline.loads(b'{"x": NaN}')["x"])  # json.dumps writes it; orjson refuses it


def test_the_execution_log_writes_one_line_per_record_and_reads_them_back(tmp_path):
    log = ExecLog(tmp_path / "w1.0.events.jsonl", "w1.0")
    log.write(LogEvent.STARTED, job=1, attempt=1, tenant=2, fault=None)
    log.write(LogEvent.FINISHED, job=1, attempt=1, points=["mid-work"])
    log.close()
    records, used = parse_lines(log.path.read_bytes() + b'{"torn')
    assert used == len(log.path.read_bytes())
    assert [(r["event"], r["job"], r["pid"], r["worker"]) for r in records] == [
        ("started", 1, os.getpid(), "w1.0"), ("finished", 1, os.getpid(), "w1.0")]


def test_started_records_are_counted_by_their_event_whatever_the_spacing(tmp_path):
    log = ExecLog(tmp_path / "w1.0.events.jsonl", "w1.0")
    log.write(LogEvent.STARTED, job=1, attempt=1)
    log.write(LogEvent.FAILED, job=1, attempt=1, error='RuntimeError: "event": "started" in a message')
    log.close()
    data = log.path.read_bytes() + b'{"event": "started", "job": 2}\n{"event":"started","job":'  # torn
    assert count_started(data) == 2 and count_started(data, job=1) == 1 and count_started(data, job=2) == 1
