"""``--html FILE`` as a user opens it: one self-contained page, loaded from a file in headless
Chromium (no network), rendered without a script error, and not blank."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
from matplotlib import image

from tests.conftest import run_cli
from tests.integration import browser

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


@pytest.fixture(scope="module")
def no_browser():
    return browser.unavailable()


def _check_self_contained(text: str) -> None:
    # Nothing may load from elsewhere: no external script, stylesheet, image or font.
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:|//)""", text)
    assert "<link" not in text and "@import" not in text and "url(http" not in text


def _open(page, tmp_path, no_browser, name: str):
    if no_browser:
        pytest.skip(no_browser)
    loaded = browser.load(page, tmp_path / "profile")
    assert 'data-rendered="yes"' in loaded.dom, loaded.console
    assert not re.search(r"<html[^>]*data-errors", loaded.dom) and \
        not [c for c in loaded.console if "Uncaught" in c], loaded.console
    png = browser.screenshot(page, tmp_path / f"{name}.png", tmp_path / "profile")
    pixels = image.imread(png)[..., :3]
    assert pixels.std() > 0.05 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50, \
        "the screenshot is blank"
    print(f"screenshot: {png}")
    return loaded.dom


def test_search_page_shows_tables_and_a_timeline_per_counterexample(tmp_path, no_browser):
    page = tmp_path / "search.html"
    r = run_cli("--design", "lease", "--faults", "crash,overrun", "--time-scale", "0.2", "--examples", "3",
                "--seed", "3", "--out", str(tmp_path / "ce"), "--html", str(page), "--json",
                str(tmp_path / "r.json"), timeout=600)
    assert r.returncode == 1, r.stderr
    assert f"HTML report: {page}" in r.stdout
    text = page.read_text()
    _check_self_contained(text)
    saved = sorted((tmp_path / "ce").glob("*.json"))
    assert saved and all(f"pg-job-chaos replay {p}" in text for p in saved)
    dom = _open(page, tmp_path, no_browser, "search")
    assert dom.count('class="properties"') == 1 and "VIOLATED" in dom
    assert dom.count('class="timeline"') == len(saved)  # one per saved schedule
    assert 'class="bar bar-' in dom and "mark mark-lease" in dom and "mark mark-commit" in dom
    if re.search(r"violates [^<]*horizon", dom):
        assert "mark mark-horizon" in dom  # the long transaction, drawn under its bar
    assert re.search(r">\d+/\d+</text>", dom)  # bars labelled job/attempt
    # Every violated property's row names its own schedule and replay command, as the JSON does; the
    # timeline of the run it names is the one anchored there (issue 36, item 4).
    props = json.loads((tmp_path / "r.json").read_text())["properties"]
    violated = {n: p for n, p in props.items() if p["status"] == "violated"}
    assert len(violated) >= 2, violated
    rows = re.findall(r'<tr><td>([a-z-]+)</td>.*?<td class="schedule-ref">(.*?)</td></tr>', dom)
    named = {n: cell for n, cell in rows if cell}
    assert set(named) == set(violated), named
    for n, p in violated.items():
        ref = re.search(r'href="#schedule-(\d+)"', named[n])[1]
        assert p["schedule"] in named[n] and html.escape(p["replay"]) in named[n], named[n]
        section = dom.split(f'id="schedule-{ref}"', 1)[1].split('id="schedule-', 1)[0]
        assert html.escape(p["replay"]) in section and n in section
        assert f"{p['shrink']})" in section  # "... comes from this run (shrunk)"


@pytest.mark.xdist_group("compare_cli")  # one compare for both (conftest.compare_cli)
def test_compare_page_shows_the_matrix(compare_cli, tmp_path, no_browser):
    r, d = compare_cli  # the same compare test_cli.py reads as JSON
    page = d / "compare.html"
    assert r.returncode == 1, r.stderr
    _check_self_contained(page.read_text())
    dom = _open(page, tmp_path, no_browser, "compare")
    assert 'class="matrix"' in dom and "lease-heartbeat" in dom
    assert "mark mark-death" in dom  # one-transaction's worker dies of the crash, on its own lane


def test_experiment_page_inlines_its_curves(tmp_path, no_browser):
    page = tmp_path / "vacuum.html"
    r = run_cli("experiment", "vacuum", "--quick", "--html", str(page), timeout=600)
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    _check_self_contained(text)
    assert text.count("data:image/png;base64,") == 1  # vacuum draws one curve
    dom = _open(page, tmp_path, no_browser, "vacuum")
    assert '<img src="data:image/png;base64,' in dom and 'class="text"' in dom
