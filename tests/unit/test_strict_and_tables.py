"""``--strict`` (an unknown fails the run) and the 100-column terminal tables."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pg_job_chaos import properties
from pg_job_chaos.core.errors import EXIT_HELD, EXIT_VIOLATED
from pg_job_chaos.harness.cli import main as cli
from pg_job_chaos.harness.report import text as report
from pg_job_chaos.harness.report.result import Report
from pg_job_chaos.properties.core import Result

EVIDENCE = ("job 1 committed 2 job_runs rows (attempts 1, 2); retries re-send: make the effect idempotent, "
            "with a key the receiver remembers, so that a second send changes nothing at all")


def _results(status: str) -> dict:
    out = {n: Result(n, properties.HELD, evidence="held in all 3 runs") for n in properties.PROPERTIES}
    out["horizon"] = Result("horizon", status, evidence="could not decide: no samples")
    return out


def _report(status: str, *, strict: bool, **kw) -> Report:
    return Report("search", "lease", {"lease": _results(status)}, strict=strict, **kw)


@pytest.mark.parametrize("strict, expected", [(False, EXIT_HELD), (True, EXIT_VIOLATED)])
def test_an_unknown_fails_the_run_only_with_strict(strict, expected):
    r = _report(properties.UNKNOWN, strict=strict)
    assert r.exit_code() == expected
    assert ("--strict: horizon could not decide; the run fails" in r.failures()) is strict


def test_strict_still_passes_a_run_that_held_and_fails_a_violation():
    assert _report(properties.HELD, strict=True).exit_code() == EXIT_HELD
    assert _report(properties.VIOLATED, strict=False).exit_code() == EXIT_VIOLATED


def test_a_fault_that_never_struck_fails_only_with_strict_and_no_strike_point_always_fails():
    assert _report(properties.HELD, strict=False, never_struck=["crash"]).exit_code() == EXIT_HELD
    r = _report(properties.HELD, strict=True, never_struck=["crash"])
    assert r.exit_code() == EXIT_VIOLATED and \
        "--strict: crash struck in no run; the run fails" in r.failures()
    r = _report(properties.HELD, strict=False, no_strike=True)
    assert r.exit_code() == EXIT_VIOLATED and r.failures()[0].startswith("NO FAULT COULD STRIKE")


@pytest.mark.parametrize("sub", [["search"], ["replay", "f.json"], ["compare"]])
def test_strict_and_html_are_options_of_search_replay_and_compare(sub):
    args = cli.parser().parse_args([*sub, "--strict", "--html", "r.html"])
    assert args.strict and args.html == "r.html"


def test_junit_under_strict_reports_unknown_as_a_failure(tmp_path):
    for strict in (False, True):
        path = tmp_path / f"{strict}.xml"
        report.junit(str(path), {"lease": _results(properties.UNKNOWN)}, strict=strict)
        case = next(c for c in ET.parse(path).getroot().iter("testcase") if c.get("name") == "horizon")
        assert (case.find("failure") is not None) is strict and \
            (case.find("skipped") is not None) is not strict


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


def test_the_reports_json_and_warnings_are_derived_from_its_verdicts():
    r = _report(properties.VIOLATED, strict=False, never_struck=["crash"], budget_spent=True)
    r.data = {"design": "lease"}
    doc = r.to_json()
    assert doc["design"] == "lease" and doc["failed"] and doc["failing"] == ["horizon"]
    assert doc["fail_on"] == list(properties.PROPERTIES) and doc["allowed_violations"] == []
    assert r.warnings() == ["WARNING: fault crash struck in no run of this search: "
                            "nothing was tested against it",
                            "--budget ran out before the example budget: fewer schedules ran than asked for"]
