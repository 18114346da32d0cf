"""Every issue-ready finding page (``docs/findings/libraries/*.md``) replays as it says.

A page names, in an HTML comment the site does not show, the schedule it cites and the set of
properties that schedule violates on the library::

    <!-- finding: schedule=docs/findings/libraries/schedules/procrastinate-retry-limit.json """ \
    """design=procrastinate violates=bounded-attempts,bounded-blast-radius,terminal-states -->

Each is replayed on that design (the schedule's own time scale, design options and versions) and
must violate exactly that set -- two tries, since a schedule that races a library's own timers (a
heartbeat, a once-a-second flush) may miss its window once on a loaded machine; a page whose
schedule misses twice is wrong, or the library changed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pg_job_chaos.core.schedule import load
from pg_job_chaos.properties import check

pytestmark = pytest.mark.chaos

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs" / "findings" / "libraries").glob("*.md"))
MARK = re.compile(r"<!-- finding: (?P<fields>[^>]*?) -->")
TRIES = 2


def _cited(page: Path) -> list[dict]:
    out = []
    for m in MARK.finditer(page.read_text()):
        fields = dict(f.split("=", 1) for f in m.group("fields").split())
        fields["violates"] = set(filter(None, fields.get("violates", "").split(",")))
        out.append(fields)
    return out


CASES = [(page, c) for page in PAGES for c in _cited(page)]


def test_every_finding_page_cites_a_schedule():
    assert PAGES, "no finding pages under docs/findings/libraries/"
    for page in PAGES:
        if page.name == "index.md":
            continue
        cited = _cited(page)
        assert cited, \
            f"{page.name} cites no schedule (<!-- finding: schedule=... design=... violates=... -->)"
        for c in cited:
            assert (ROOT / c["schedule"]).is_file(), (page.name, c["schedule"])
            assert c.get("design") and c["violates"], (page.name, c)


@pytest.mark.parametrize("page,cited", CASES, ids=[f"{p.stem}:{Path(c['schedule']).stem}" for p, c in CASES])
def test_finding_replays_to_the_same_violations(runner, page, cited):
    pytest.importorskip(cited["design"], reason=f"{cited['design']} is not installed (the libraries extra)")
    schedule = load(ROOT / cited["schedule"])
    schedule = schedule.replace(design=cited["design"]) if schedule.design != cited["design"] else schedule
    seen = []
    for _ in range(TRIES):
        h = runner.run(schedule)
        violated = {name for name, r in check(h).items() if r.status == "violated"}
        seen.append(sorted(violated))
        if violated == cited["violates"]:
            return
    pytest.fail(f"{page.name}: {cited['schedule']} on {cited['design']} violated {seen}, "
                f"the page says {sorted(cited['violates'])}")
