"""Every issue-ready finding page (``docs/findings/libraries/*.md``) replays to what it claims.

A page names, in an HTML comment the site does not show, the schedule it cites, the design, and the
properties it claims **of the library** (``violates=``)::

    <!-- finding: schedule=docs/findings/libraries/schedules/procrastinate-retry-limit.json """ \
    """design=procrastinate violates=bounded-attempts -->

Each is replayed on that design (the schedule's own time scale -- 1 for every page --, design
options and versions) and must violate at least every claimed property; other properties may be
violated too (the body-first cells of at-least-once delivery, the run's worker budget), and are not
claims. One replay, no second try (issue 51: a test that passes only on its second try is a race whose
winner it asserts). What each waits for is the library's own timers at time scale 1 -- a recovery tick,
a heartbeat's staleness, seconds apart -- against a crash at a named point every execution, or a job
three leases long: a busy machine's stall (tens of ms) moves none of them past its window. Measured: each
page's replay claimed what it says 4 times in 4 beside two busy loops (``PGJC_STRESS=2``) on the suite's
2-core machine. A page whose replay can miss its window is a race: it says ``cost=bench`` and is replayed
by ``python run.py bench --libraries`` (``harness/bench/findings.py``), as a page too slow for the suite is.

A race that no schedule reproduces often enough to replay cites the pinned test that forces it instead,
``test=tests/chaos/test_x.py::test_name`` in place of ``schedule=``: that test asserts the violation in the
library's own records and the suite runs it; here the test is only required to exist.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

from pg_job_chaos.harness.bench import findings
from pg_job_chaos.harness.bench.findings import BENCH, ROOT, cited, pages, replay

pytestmark = pytest.mark.chaos

PAGES = pages()
# Not a claim about a library: the harness's body commits its job_runs row and sends its effect before
# the library's finish (at-least-once by design where the library has no atomic finish path), and
# terminal-states follows from the run's own worker budget or deadline.
NOT_CLAIMS = {"single-commit", "at-most-once-effects", "no-stale-effect", "terminal-states"}

CASES = [(page, c) for page in PAGES for c in cited(page) if "schedule" in c]


def pinned_test_exists(test: str, root: Path = ROOT) -> bool:
    """Whether ``path::name`` names a test function defined at the top level of that file."""
    path, _, name = test.partition("::")
    file = root / path
    return name.startswith("test_") and file.is_file() and any(
        isinstance(node, ast.FunctionDef) and node.name == name for node in ast.parse(file.read_text()).body)


def test_every_finding_page_cites_a_schedule_and_claims_only_the_librarys_properties():
    assert PAGES, "no finding pages under docs/findings/libraries/"
    for page in PAGES:
        found = cited(page)
        assert found, \
            f"{page.name} cites no schedule (<!-- finding: schedule=... design=... violates=... -->)"
        for c in found:
            assert ("schedule" in c) != ("test" in c), (page.name, "a schedule or a pinned test, one", c)
            if "schedule" in c:
                assert (ROOT / c["schedule"]).is_file(), (page.name, c["schedule"])
                assert c["cost"] in ("suite", BENCH), (page.name, c["cost"])
            else:  # the suite runs the test; no replay, so no cost to name
                assert pinned_test_exists(c["test"]), (page.name, c["test"])
                assert c["cost"] == "suite", (page.name, c["cost"])
            assert c.get("design") and c["violates"], (page.name, c)
            assert not c["violates"] & NOT_CLAIMS, (page.name, sorted(c["violates"] & NOT_CLAIMS))


def test_a_pinned_test_is_found_by_its_file_and_name(tmp_path):
    (tmp_path / "t.py").write_text("def test_a():\n    pass\n\n\n"
                                   "class C:\n    def test_b(self):\n        pass\n")
    assert pinned_test_exists("t.py::test_a", tmp_path)
    assert not pinned_test_exists("t.py::test_b", tmp_path)  # a method: not a top-level test here
    assert not pinned_test_exists("t.py::test_c", tmp_path)
    assert not pinned_test_exists("u.py::test_a", tmp_path)


def test_the_bench_names_a_page_citing_a_pinned_test_and_replays_nothing(tmp_path, monkeypatch):
    (tmp_path / "x.md").write_text("<!-- finding: test=tests/chaos/test_awa.py::test_x design=awa "
                                   "violates=library-one-finish -->\n")
    monkeypatch.setattr(findings, "PAGES", tmp_path)
    out = io.StringIO()
    findings.figures(None, out)  # no runner: a replay would fail
    assert "x.md: cites the pinned test tests/chaos/test_awa.py::test_x (run by the suite), not replayed" \
        in out.getvalue()
    (c,) = cited(tmp_path / "x.md")
    assert c["test"] == "tests/chaos/test_awa.py::test_x" and c["cost"] == "suite"
    with pytest.raises(ValueError, match="a pinned test"):
        replay(None, c)


@pytest.mark.parametrize("page,c", CASES, ids=[f"{p.stem}:{Path(c['schedule']).stem}" for p, c in CASES])
def test_finding_replays_to_its_claims(runner, page, c):
    if c["cost"] == BENCH:
        pytest.skip(f"{page.name}: a replay too slow for the suite, run by python run.py bench --libraries")
    pytest.importorskip(c["design"].replace("-", "_"),
                        reason=f"{c['design']} is not installed (the libraries extra)")
    seconds, violated = replay(runner, c)
    print(f"{page.name}: replayed in {seconds:.1f} s")
    assert c["violates"] <= violated, (f"{page.name}: {c['schedule']} on {c['design']} violated "
                                       f"{sorted(violated)}, the page claims {sorted(c['violates'])}")
