"""The ``--strict`` CI recipe, as the README (``examples/ci/``) and the CI guide write it, works for a
user's own worker: ``examples/my_worker.py`` in place of ``--design lease-outbox``, two examples.

The worker keeps every safety property under ``crash,overrun`` (nothing takes back a crashed job, so
nothing runs twice); it has no ``accepted_finishes`` and no lease, so ``library-one-finish``,
``success-final`` and ``horizon`` are not judged for it -- unknown, never held -- and ``--strict``
passes over them, as it does not over an unknown of a run (``tests/unit/test_own_clock.py``).
"""

from __future__ import annotations

import json
import re
import shlex
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.integration

# Where the recipe is written: the README sends CI users to examples/ci/, whose command is the guide's.
RECIPES = ("docs/guides/ci.md", "examples/ci/chaos.sh", "examples/ci/github-actions.yml")
SAFETY_EXCEPT_UNJUDGED = ("tenant-isolation", "single-commit", "no-overlap", "at-most-once-effects",
                          "attempts-counted", "bounded-attempts", "no-stale-effect", "done-means-committed")


def _recipes() -> set[str]:
    found = set()
    for path in RECIPES:
        found |= {m.group(1).strip() for m in re.finditer(r"^\s*pg-job-chaos (search .*--strict.*)$",
                                                          (ROOT / path).read_text(), re.MULTILINE)
                  if not m.group(1).rstrip().endswith("...")}
    return found


def test_the_readme_and_guide_strict_recipe_holds_for_your_own_worker(tmp_path):
    recipes = _recipes()
    assert len(recipes) == 1, recipes  # one command, copied into every recipe
    args = shlex.split(recipes.pop())
    assert args[args.index("--design") + 1] == "lease-outbox" and "--strict" in args
    args[args.index("--design") + 1] = f"{ROOT / 'examples' / 'my_worker.py'}:MyWorker"
    args[args.index("--examples") + 1] = "2"
    r = run_cli(*args, timeout=300, cwd=tmp_path)  # the recipe's chaos-out/ under tmp_path
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "chaos-out" / "result.json").read_text())
    props = doc["properties"]
    assert doc["failed"] is False and doc["failing"] == []
    for name in SAFETY_EXCEPT_UNJUDGED:
        assert props[name]["status"] == "held", (name, props[name])
    # not judged for this design: unknown (never held), saying why; --strict passes over it
    lof = props["library-one-finish"]
    assert (lof["status"], lof["judged"]) == ("unknown", False)
    assert "implement accepted_finishes" in lof["evidence"]
    final = props["success-final"]  # its statuses are in its own table, which logs no changes
    assert (final["status"], final["judged"]) == ("unknown", False)
    assert "accepted_finishes" in final["evidence"]
    assert (props["horizon"]["status"], props["horizon"]["judged"]) == ("unknown", False)
    assert "no verdict: my-worker has no lease the harness sets" in props["horizon"]["evidence"]
    assert "could not decide; the run fails" not in r.stdout + r.stderr
    # said, for the gated properties (horizon is a resource property: not gated by --fail-on safety)
    assert "--strict passes over what is not judged for this design (unknown, never held): " \
           "library-one-finish, success-final\n" in r.stdout + r.stderr
    # the JUnit file agrees with the exit code: no failure, the unjudged property skipped with its reason
    junit = ET.parse(tmp_path / "chaos-out" / "junit.xml").getroot()
    cases = {c.get("name"): c for c in junit.iter("testcase")}
    assert not any(c.find("failure") is not None for c in cases.values())
    assert "not judged for this design" in cases["library-one-finish"].find("skipped").get("message")
