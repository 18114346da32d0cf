"""The documentation: the README stays short and keeps its two commands, its links land, and the
MkDocs site in docs/ builds with ``--strict`` (mkdocs.yml's validation makes a dead link, a dead
anchor or a page left out of the nav a warning, and --strict a failure)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
MAX_LINES = 250
COMMANDS = [
    "pip install -e . && python run.py --design lease --faults crash,overrun   "
    "# the main job, on a throwaway PostgreSQL 17.10 it starts itself",
    "pip install -e '.[test,libraries]' && pytest                                "
    "# the tests (what .ci/run runs)",
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_short_and_starts_with_its_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, \
        f"README.md has {len(lines)} lines; at most {MAX_LINES} (move the rest to docs/)"
    assert lines[0] == "# pg-job-chaos"
    first_block = lines[lines.index("```sh") + 1:]
    assert first_block[:3] == [*COMMANDS, "```"], first_block[:3]
    assert lines.index("```sh") == 2  # the commands come first, before any prose


def _anchors(markdown_text: str) -> set[str]:
    """The heading ids MkDocs gives a page (Python-Markdown's toc slugify)."""
    from markdown.extensions.toc import slugify

    headings = re.findall(r"^#{1,6} (.+?)\s*$", re.sub(r"```.*?```", "", markdown_text, flags=re.S), re.M)
    return {slugify(h.replace("`", ""), "-") for h in headings}


def test_every_relative_link_of_the_readme_lands():
    """MkDocs checks the links inside docs/; the README lives outside it, so it is checked here: every
    relative link names a file of the repository, and an anchor into a page names one of its headings."""
    dead = []
    for target in LINK.findall(README.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        file = ROOT / path
        if not file.exists():
            dead.append(target)
        elif anchor and importlib.util.find_spec("markdown") and anchor not in _anchors(file.read_text()):
            dead.append(target)
    assert not dead, f"README.md links to what does not exist: {dead}"
    assert "docs/guides/own-worker.md" in LINK.findall(README.read_text())


def test_every_docs_page_is_in_the_nav_and_the_compare_files_stay():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert pages and all(f" {p}" in nav for p in pages), [p for p in pages if f" {p}" not in nav]
    for library in ("procrastinate", "chancy", "pgqueuer"):
        assert (ROOT / "docs" / "compare" / library / "compare.json").is_file(), library
    # the one matrix of every hosted queue (run.py bench --libraries --matrix): each group's JSON stays
    matrix = ROOT / "docs" / "compare" / "matrix"
    assert (matrix / "matrix.md").is_file() and len(list(matrix.glob("scale-*/matrix.json"))) >= 4
    assert sorted((ROOT / "docs" / "findings" / "libraries" / "schedules").glob("*.json"))


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_the_site_builds_strict(tmp_path):
    """A dead link or anchor, or a page missing from the nav, fails the build; the JSON schedules the
    findings link are copied into the site."""
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                        str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (site / "index.html").is_file() and (site / "guides" / "own-worker" / "index.html").is_file()
    assert (site / "compare" / "chancy" / "S4.json").is_file()
    assert (site / "findings" / "libraries" / "schedules" / "chancy-unflushed-success.json").is_file()


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_the_strict_build_fails_on_a_dead_anchor(tmp_path):
    """The validation settings are what make --strict catch a dead anchor (MkDocs's default only logs
    it at info level): a copy of the site with one dead anchor must fail."""
    import shutil

    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with open(tmp_path / "docs" / "index.md", "a") as f:
        f.write("\n[dead](concepts.md#no-such-heading)\n")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build",
                        "--strict", "--site-dir", str(tmp_path / "site")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0 and "no-such-heading" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
