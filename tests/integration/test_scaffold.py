"""The design file ``pg-job-chaos new-design`` writes runs as it is: every property holds fault-free,
and ruff (the rules this project checks itself with, a user's default line length) accepts it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.integration


def test_the_written_design_holds_fault_free_and_ruff_accepts_it(tmp_path):
    r = run_cli("new-design", "my_queue", "--out", str(tmp_path / "designs"), timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    design = tmp_path / "designs" / "my_queue.py"
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select",
                           "E,F,W,I,B,UP", str(design)], capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    r = run_cli("search", "--design", f"{design}:MyQueue", "--examples", "1", "--seed", "1",
                "--json", str(tmp_path / "s.json"), "--out", str(tmp_path / "out"), timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    props = json.loads((tmp_path / "s.json").read_text())["properties"]
    # library-one-finish judges what the queue itself recorded, horizon a transaction against the queue's
    # lease: the template leaves both optional hooks (accepted_finishes, lease_seconds) out, so neither is
    # judged -- unknown, never held, and not what --strict fails on.
    for name in ("library-one-finish", "horizon", "success-final"):  # success-final: no accepted_finishes
        result = props.pop(name)
        assert (result["status"], result["judged"]) == ("unknown", False), result
    assert len(props) >= 11 and {p["status"] for p in props.values()} == {"held"}, props
