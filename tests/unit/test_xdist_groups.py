"""The suite's ``xdist_group`` marks take effect: tests of one group run in one worker process.

The suite leans on them (``pyproject.toml``'s ``--dist loadgroup``): one costly session fixture for the
tests that share it (``compare_cli``, the ``replica`` pair) and one worker for the tests whose process
checks another test's command line would match (``harness-processes``). pytest-xdist 3.8 groups by
renaming ``Item._nodeid``, which pytest 9.2 stopped reading: the marks were ignored without a word, each
group's tests spread over both workers. No PostgreSQL; two xdist workers for a few seconds.
"""

from __future__ import annotations

import subprocess
import sys

GROUPED = '''
import os
import pytest

@pytest.mark.xdist_group("one")
@pytest.mark.parametrize("n", range(4))
def test_grouped(n):
    print("GROUPED", os.environ["PYTEST_XDIST_WORKER"])

@pytest.mark.parametrize("n", range(4))
def test_free(n):
    pass
'''


def test_a_groups_tests_share_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's addopts
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup",
                        "-p", "no:cacheprovider", "-rP", "-q", "test_grouped.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    workers = {line.split()[1] for line in r.stdout.splitlines() if line.startswith("GROUPED ")}
    assert len(workers) == 1, (workers, "xdist_group was ignored: see pyproject.toml's pytest pin")
