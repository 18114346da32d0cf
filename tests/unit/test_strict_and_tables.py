"""``--strict`` (an unknown fails the run) and the 100-column terminal tables."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET

import pytest

from pg_job_chaos import properties
from pg_job_chaos.core.errors import EXIT_HELD, EXIT_VIOLATED
from pg_job_chaos.harness.cli import commands
from pg_job_chaos.harness.cli import main as cli
from pg_job_chaos.harness.report import text as report
from pg_job_chaos.properties.core import Result

EVIDENCE = ("job 1 committed 2 job_runs rows (attempts 1, 2); retries re-send: make the effect idempotent, "
            "with a key the receiver remembers, so that a second send changes nothing at all")


def _results(status: str) -> dict:
    out = {n: Result(n, properties.HELD, evidence="held in all 3 runs") for n in properties.PROPERTIES}
    out["horizon"] = Result("horizon", status, evidence="could not decide: no samples")
    return out


@pytest.mark.parametrize("strict, expected", [(False, EXIT_HELD), (True, EXIT_VIOLATED)])
def test_an_unknown_fails_the_run_only_with_strict(strict, expected, capsys):
    assert commands._exit_code(argparse.Namespace(strict=strict), _results(properties.UNKNOWN)) == expected
    said = capsys.readouterr().out
    assert ("--strict: horizon could not decide; the run fails" in said) is strict


def test_strict_still_passes_a_run_that_held_and_fails_a_violation():
    assert commands._exit_code(argparse.Namespace(strict=True), _results(properties.HELD)) == EXIT_HELD
    assert commands._exit_code(argparse.Namespace(strict=False), _results(properties.VIOLATED)) == EXIT_VIOLATED


@pytest.mark.parametrize("sub", [["search"], ["replay", "f.json"], ["compare"]])
def test_strict_and_html_are_options_of_search_replay_and_compare(sub):
    args = cli.parser().parse_args([*sub, "--strict", "--html", "r.html"])
    assert args.strict and args.html == "r.html"


def test_junit_under_strict_reports_unknown_as_a_failure(tmp_path):
    for strict in (False, True):
        path = tmp_path / f"{strict}.xml"
        report.junit(str(path), {"lease": _results(properties.UNKNOWN)}, strict=strict)
        case = next(c for c in ET.parse(path).getroot().iter("testcase") if c.get("name") == "horizon")
        assert (case.find("failure") is not None) is strict and (case.find("skipped") is not None) is not strict


def test_the_property_table_fits_100_columns_wraps_evidence_and_shortens_lists():
    results = {n: Result(n, properties.VIOLATED, count=30, jobs=list(range(1, 31)), evidence=EVIDENCE)
               for n in properties.PROPERTIES}
    text = report.property_table(results, title="lease (local) under faults crash,overrun: 21 runs in 10.9 s")
    assert max(len(line.rstrip()) for line in text.splitlines()) <= report.WIDTH
    rows: list[list[str]] = []  # each row's cells, its wrapped lines joined
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) != 5:
            continue
        if cells[0]:
            rows.append(cells)
        else:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
    assert [r[0] for r in rows] == list(properties.PROPERTIES)  # names never wrap
    assert all(r[3] == "1, 2, 3 and 27 more" for r in rows)
    assert all(r[4] == EVIDENCE for r in rows)  # wrapped, never cut


def test_the_matrix_of_five_designs_fits_100_columns():
    from pg_job_chaos.workers import DESIGNS

    res = {n: Result(n, properties.VIOLATED, count=12) for n in properties.PROPERTIES}
    text = report.matrix({d: res for d in DESIGNS})
    assert max(len(line.rstrip()) for line in text.splitlines()) <= report.WIDTH


def test_shortlist():
    assert report.shortlist([1, 2, 3], 3) == "1, 2, 3"
    assert report.shortlist([1, 2, 3, 4], 3) == "1, 2, 3, 4"
    assert report.shortlist(range(1, 11), 3) == "1, 2, 3 and 7 more"
