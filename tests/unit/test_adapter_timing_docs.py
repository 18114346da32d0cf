"""The timing tables of docs/reference/adapters.md are generated from each adapter's TIMING when the site
is built (docs/hooks/timing.py, an MkDocs hook): one marker per hosted queue, every interval in its
table, the real seconds from the same Intervals the runs use -- no copy to fall out of date."""

from __future__ import annotations

import importlib.util
import re

import pytest

from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.workers import LIBRARIES
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "reference" / "adapters.md"
QUEUES = [name for name in LIBRARIES if name != "contract"]


def _hook():
    spec = importlib.util.spec_from_file_location("timing_hook", ROOT / "docs" / "hooks" / "timing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_marks_every_hosted_queue_and_the_site_runs_the_hook():
    marks = re.findall(r"<!-- timing: ([\w-]+) -->", PAGE.read_text())
    assert sorted(marks) == sorted([*QUEUES, "all"])
    assert "docs/hooks/timing.py" in (ROOT / "mkdocs.yml").read_text()


@pytest.mark.parametrize("name", QUEUES)
def test_each_queues_tables_come_from_its_timing(name):
    hook = _hook()
    try:
        cls = hook.design_class(name)
    except ImportError as exc:
        pytest.skip(f"{exc.name} is not installed (pip install -e '.[libraries]')")
    table = hook.library(name)
    for i in cls.TIMING.intervals:
        assert f"| {i.name} | `{i.setting}` |" in table
    # the real seconds at time scale 1 are the values a run at that scale sets
    real = table[table.index("| interval | documented |"):].splitlines()
    column = next(k for k, head in enumerate(real[0].split(" | ")) if re.match(r"time scale 1\b", head))
    at_one = cls.TIMING.values(Schedule(jobs=(JobSpec(1),), time_scale=1.0))
    for i, row in zip(cls.TIMING.intervals, real[2:], strict=False):
        assert row.split(" | ")[column].startswith(hook._num(at_one[i.name])), row
    try:
        summary = hook.summary()  # every queue's row: imports every adapter
    except ImportError as exc:
        pytest.skip(f"its own tables held; the summary needs {exc.name} (pip install -e '.[libraries]')")
    assert f"| `{name}` |" in summary
