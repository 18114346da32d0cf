"""``run.py corpus --quick`` (issue 48): the command's whole path -- cases loaded, each version's environment
(the pinned one here: nothing to build), a ``search`` subprocess per side, its JSON read back into the
table -- on the cases marked quick, each for corpus.command.QUICK_BUDGET seconds. It shows the command
runs and reports what its searches did, not that they find: the corpus's figures are ``run.py bench
--corpus``'s (docs/findings/corpus.md). A version this machine cannot run is refused with why."""

from __future__ import annotations

import json

import pytest

from pg_job_chaos.harness.corpus import case, systems
from pg_job_chaos.harness.corpus.command import CORPUS, QUICK_BUDGET
from tests.conftest import run_cli

pytestmark = pytest.mark.integration


def test_quick_runs_each_quick_case_at_its_pinned_version_and_reports_its_search(tmp_path):
    quick = [c for c in case.load_dir(CORPUS) if c.quick]
    assert quick, "corpus/ has cases marked quick = true"
    r = run_cli("corpus", "--quick", "--json", str(tmp_path / "q.json"), "--out", str(tmp_path / "out"),
                timeout=300)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads((tmp_path / "q.json").read_text())
    rows = {row["case"]: row for row in doc["cases"]}
    assert sorted(rows) == sorted(c.name for c in quick) and doc["replays"] == 1
    for c in quick:
        row = rows[c.name]
        b = row["buggy"]
        assert row["status"] in ("found", "not found"), row
        assert b["env"] == "pinned" and b["version"] == c.buggy and b["runs"] >= 1
        assert f"--budget {QUICK_BUDGET:g}" in " ".join(b["command"])
        if row["status"] == "found":  # its first counterexample, shrunk, replayed once
            assert b["first_runs"] >= 1 and b["schedule"] is not None and b["replays"] == 1
        else:
            assert b["verdict"] in ("held", "unknown") and b["first_runs"] is None
        assert c.name in r.stdout
    assert r.returncode == (0 if all(row["status"] == "found" for row in rows.values()) else 1)


def test_a_version_that_cannot_run_here_is_refused_with_why(tmp_path):
    node = systems.node_major()
    if node is None or node >= 22:
        pytest.skip("this machine's node runs pg-boss 11")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "boss.toml").write_text(
        'system = "pg-boss"\nbuggy = "11.0.0"\nlink = "https://github.com/timgit/pg-boss"\n'
        'summary = "s"\nproperty = "no-overlap"\nbudget = 10\n')
    r = run_cli("corpus", "--cases", str(tmp_path / "cases"), "--json", str(tmp_path / "b.json"), timeout=60)
    assert r.returncode == 0, r.stderr  # a refusal is an answer, not a failure
    (row,) = json.loads((tmp_path / "b.json").read_text())["cases"]
    assert row["status"] == "refused" and "needs Node >= 22" in row["why"] and row["buggy"] is None
