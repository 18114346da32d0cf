"""``python run.py bench --libraries``: the library finding pages too slow for the test suite, replayed.

Each issue-ready page under ``docs/findings/libraries/`` names, in an HTML comment the site does not
show, the schedule it cites, the design, the properties it claims of the library and, for a replay
that costs more than the suite can spend (a pause longer than a library's 20-lease recovery period,
at time scale 1), ``cost=bench``::

    <!-- finding: schedule=docs/findings/libraries/schedules/x.json design=procrastinate """ \
    """violates=library-one-finish cost=bench -->

``tests/chaos/test_findings.py`` replays every page without ``cost=bench`` and requires each claimed
property violated; this replays the ``cost=bench`` ones the same way and prints, per page, the
seconds it took, what it violated and whether every claim held. Printed, never asserted (a bench).
Where the checkout's docs are not present (an installed wheel), it says so and replays nothing.

A race no schedule reproduces reliably is cited by the pinned test that forces it instead of a
schedule, ``test=tests/chaos/test_x.py::test_name``: the test asserts the violation in the library's
own records and the suite runs it; neither the suite's replay nor this bench replays such a page (this
names it and says so).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from ...core.schedule import load

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "findings" / "libraries"
MARK = re.compile(r"<!-- finding: (?P<fields>[^>]*?) -->")
BENCH = "bench"  # the cost= value of a replay left to the bench


def cited(page: Path) -> list[dict]:
    """The page's finding comments: schedule (or test, a pinned test's ``path::name``), design,
    violates (a set: the claimed properties), cost."""
    out = []
    for m in MARK.finditer(page.read_text()):
        fields: dict = dict(f.split("=", 1) for f in m.group("fields").split())
        fields["violates"] = set(filter(None, fields.get("violates", "").split(",")))
        fields.setdefault("cost", "suite")
        out.append(fields)
    return out


def pages(root: Path = PAGES) -> list[Path]:
    return sorted(p for p in root.glob("*.md") if p.name != "index.md")


def replay(runner, c: dict, root: Path = ROOT) -> tuple[float, set[str]]:
    """Run one cited schedule on its design: (seconds, the properties it violated)."""
    from ...properties import check  # the properties pull in the report layer: loaded when replaying

    if "schedule" not in c:
        raise ValueError(f"{c.get('test')}: a pinned test, not a schedule: the suite runs it")

    schedule = load(root / c["schedule"])
    if schedule.design != c["design"]:
        schedule = schedule.replace(design=c["design"])
    t0 = time.perf_counter()
    h = runner.run(schedule)
    seconds = time.perf_counter() - t0
    return seconds, {name for name, r in check(h).items() if r.status == "violated"}


def figures(runner, out) -> None:
    """Replay the ``cost=bench`` finding pages; print seconds, violations and the claims' verdict."""
    print("\nfinding pages left to the bench (docs/findings/libraries, cost=bench):", file=out)
    if not PAGES.is_dir():
        print(f"  skipped: no {PAGES} here (the checkout's docs are not installed)", file=out)
        return
    for page in pages(PAGES):
        for c in cited(page):
            if "test" in c:
                print(f"  {page.name}: cites the pinned test {c['test']} (run by the suite), not replayed",
                      file=out)
                continue
            if c["cost"] != BENCH:
                continue
            try:
                seconds, violated = replay(runner, c)
            except Exception as exc:  # a library that does not import here: named, not fatal
                print(f"  {page.name}: not replayed ({type(exc).__name__}: {exc})", file=out)
                continue
            missing = sorted(c["violates"] - violated)
            verdict = "claims reproduced" if not missing else f"MISSED {','.join(missing)}"
            print(f"  {page.name}: {seconds:.1f} s, violated {','.join(sorted(violated)) or 'nothing'}: "
                  f"{verdict}", file=out)
