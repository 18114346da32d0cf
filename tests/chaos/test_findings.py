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
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pg_job_chaos.harness.bench.findings import BENCH, ROOT, cited, pages, replay

pytestmark = pytest.mark.chaos

PAGES = pages()
# Not a claim about a library: the harness's body commits its job_runs row and sends its effect before
# the library's finish (at-least-once by design where the library has no atomic finish path), and
# terminal-states follows from the run's own worker budget or deadline.
NOT_CLAIMS = {"single-commit", "at-most-once-effects", "no-stale-effect", "terminal-states"}

CASES = [(page, c) for page in PAGES for c in cited(page)]


def test_every_finding_page_cites_a_schedule_and_claims_only_the_librarys_properties():
    assert PAGES, "no finding pages under docs/findings/libraries/"
    for page in PAGES:
        found = cited(page)
        assert found, \
            f"{page.name} cites no schedule (<!-- finding: schedule=... design=... violates=... -->)"
        for c in found:
            assert (ROOT / c["schedule"]).is_file(), (page.name, c["schedule"])
            assert c.get("design") and c["violates"], (page.name, c)
            assert not c["violates"] & NOT_CLAIMS, (page.name, sorted(c["violates"] & NOT_CLAIMS))
            assert c["cost"] in ("suite", BENCH), (page.name, c["cost"])


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
