"""``PGJC_STRESS=N``: run the suite beside N busy loops, on purpose (issue 51).

A test must pass on a busy machine -- a shared CI runner, a laptop compiling beside it -- and a quiet one
hides the tests that lean on which race won. ``PGJC_STRESS=2 pytest`` starts two processes that spin
(``while True: pass``, at normal priority) for the whole session, in pytest's main process only (not
once per xdist worker), and stops them at its end, failed or not (``pytest_unconfigure``). Each is tied
to pytest's death (``PR_SET_PDEATHSIG`` = SIGKILL): a pytest killed with SIGKILL leaves none behind.
"""

from __future__ import annotations

import os

import pytest

from pg_job_chaos.harness.bench.busy import SPIN, BusyLoops  # noqa: F401 -- conftest's, test_stress's

ENV = "PGJC_STRESS"
MOST = 64  # a typo's guard: more would starve the machine rather than load it


def count(environ: dict[str, str] | os._Environ = os.environ) -> int:
    """The busy loops asked for: ``PGJC_STRESS`` unset or empty is 0; anything but 0..MOST is an error."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return 0
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if not 0 <= n <= MOST:
        raise pytest.UsageError(f"{ENV}={raw!r}: expected a number of busy loops, 0 to {MOST}")
    return n


