"""``run.py soak`` (harness/bench/soak.py): the controls are the docs' table, a wrong name is a usage
error listing the known ones, and the counts are read back from the saved runs. No PostgreSQL (a real
soak is ``run.py soak``; its figures are in docs/findings/benchmarks.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.faults import parse_faults
from pg_job_chaos.harness.bench import soak

DOCS = Path(__file__).resolve().parents[2] / "docs" / "findings" / "benchmarks.md"


def _docs_rows() -> dict[str, list[str]]:
    text = DOCS.read_text()
    section = text[text.index("## The harness's own false alarms"):]
    table = section[section.index("| control | design |"):].split("\n\n")[0]  # the controls' table only
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


def test_the_docs_table_is_the_controls():
    rows = _docs_rows()
    assert list(rows) == [c.name for c in soak.CONTROLS]
    for c in soak.CONTROLS:
        _, design, faults, scale, keeps, _why = rows[c.name]
        # the design, then its options as `key=value` (a hosted control's option is what it is about)
        assert [d.strip().strip("`") for d in design.split(",")] == [
            c.design, *(f"{k}={v}" for k, v in c.options.items())], c.name
        assert [f.strip() for f in faults.split(",")] == c.faults.split(","), c.name
        assert float(scale) == c.time_scale, c.name
        if c.keeps == soak.EVERY:
            assert keeps == "every property of the default gate", c.name
        else:
            assert [k.strip() for k in keeps.split(",")] == list(c.keeps), c.name


def test_every_control_keeps_known_properties_under_known_faults():
    """A kept property the gate does not know would never be judged: a control that cannot alarm."""
    for c in soak.CONTROLS:
        assert c.keeps and set(c.keeps) <= set(soak.EVERY), c.name
        assert [f.name for f in parse_faults(c.faults)] == c.faults.split(","), c.name


def test_an_unknown_control_is_a_usage_error_naming_the_known_ones():
    assert [c.name for c in soak.controls(None)] == [c.name for c in soak.CONTROLS]
    assert [c.name for c in soak.controls("lease-heartbeat")] == ["lease-heartbeat"]
    known = ("unknown 'nope'; controls: lease-outbox, lease-heartbeat, awa-fenced, dbos-transaction, "
             "pg-boss-transaction")
    with pytest.raises(UsageError, match=re.escape(known)):
        soak.controls("lease-heartbeat,nope")


def test_the_counts_are_read_back_from_the_saved_runs(tmp_path):
    lines = [
        {"control": "lease-outbox", "seed": None, "label": "crash at mid-work", "seconds": 1.5,
         "schedule": {}, "verdicts": {"horizon": "held"}, "false_alarms": {}},
        {"control": "lease-outbox", "seed": 8, "label": "", "seconds": 2.5, "schedule": {},
         "verdicts": {"horizon": "violated", "no-overlap": "violated"},
         "false_alarms": {"horizon": "x", "no-overlap": "y"}},
        {"control": "lease-heartbeat", "seed": 8, "label": "", "seconds": 3600.0, "schedule": {},
         "verdicts": {}, "false_alarms": {}},
    ]
    (tmp_path / soak.RUNS).write_text("".join(json.dumps(x) + "\n" for x in lines))
    counts = soak.tally(tmp_path)
    assert (counts["lease-outbox"].runs, counts["lease-outbox"].false_alarms) == (2, 1)
    assert counts["lease-outbox"].by_property == {"horizon": 1, "no-overlap": 1}
    assert (counts["lease-heartbeat"].runs, counts["lease-heartbeat"].false_alarms) == (1, 0)
    with pytest.raises(UsageError, match="no saved soak runs"):
        soak.tally(tmp_path / "elsewhere")
