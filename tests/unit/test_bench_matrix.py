"""The compare matrix of the hosted libraries (harness/bench/matrix.py): grouping by time scale and the
merged table, on data shaped as ``run.py compare --json`` writes it (no database)."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest

from pg_job_chaos.harness.bench import matrix
from pg_job_chaos.properties import PROPERTIES


def test_libraries_group_by_the_least_scale_they_allow_never_below_the_floor():
    libs = [NS(name="a", min_time_scale=0.05), NS(name="b", min_time_scale=1),
            NS(name="c", min_time_scale=None),
            NS(name="d", min_time_scale=1.0), NS(name="e", min_time_scale=10)]
    assert matrix.groups(libs) == {matrix.FLOOR: ["a", "c"], 1.0: ["b", "d"], 10: ["e"]}
    assert list(matrix.groups(libs)) == sorted(matrix.groups(libs))


def _group(design: str, violated: dict, files: list[str]) -> dict:
    props = {p: {"status": "held", "count": 0} for p in PROPERTIES}
    decided = {}
    for prop, (index, cause) in violated.items():
        props[prop] = {"status": "violated", "count": 1, **({"caused_by": cause} if cause else {})}
        decided[prop] = index
    return {"designs": {"lease-heartbeat": {"properties": {p: {"status": "held"} for p in PROPERTIES}},
                        design: {"properties": props, "decided_by": decided}}, "files": files}


def test_the_merged_matrix_has_a_column_per_design_and_scale_and_names_each_cell_s_schedule_and_class(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent)  # a compare writes its files relative to where it ran, or absolute
    results = {0.5: _group("awa", {"single-commit": (1, "at-least-once")},
                           [str(tmp_path / "scale-0.5/S1.json")]),  # absolute
               1.0: _group("pg-boss", {"no-overlap": (2, None)},
                           [f"{tmp_path.name}/scale-1/S1.json", f"{tmp_path.name}/scale-1/S2.json"])}
    table = matrix.merge(results, root=tmp_path)
    lines = table.splitlines()
    assert lines[0] == "| property | lease-heartbeat @0.5 | awa @0.5 | lease-heartbeat @1 | pg-boss @1 |"
    assert len(lines) == 2 + len(PROPERTIES)
    row = {line.split(" | ")[0].strip("| "): line for line in lines[2:]}
    assert "VIOLATED (1) [S1](scale-0.5/S1.json) at-least-once" in row["single-commit"]
    # a violation no run classified is said to be unclassified, never left to look like a verdict
    assert "VIOLATED (1) [S2](scale-1/S2.json) unclassified" in row["no-overlap"]
    assert row["tenant-isolation"].count("held") == 4


def test_a_group_saved_complete_is_read_not_run_again(tmp_path, monkeypatch):
    out = tmp_path / "scale-1"
    out.mkdir()
    data = _group("pg-boss", {}, [])
    (out / "matrix.json").write_text(json.dumps(data))
    (out / "group.json").write_text(json.dumps(
        {"designs": [*matrix.BASELINES, "pg-boss"], "faults": matrix.FAULTS, "examples": 2, "seed": 1,
         "seconds": 12.5}))

    def refuse(*a, **k):
        raise AssertionError("ran again")

    monkeypatch.setattr(matrix.subprocess, "run", refuse)
    assert matrix.run_group(1.0, ["pg-boss"], out, examples=2, seed=1, budget=10) == (data, 12.5)
    # another set of designs is another group: run (here: refused)
    with pytest.raises(AssertionError, match="ran again"):
        matrix.run_group(1.0, ["oban"], out, examples=2, seed=1, budget=10)
