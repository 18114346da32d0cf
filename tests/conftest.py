"""Shared fixtures. One throwaway PostgreSQL per test session, started only if a test asks for it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import pg_job_chaos
from tests import stress

pytest_plugins = ("pytester",)  # tests of the pytest plugin (pg_job_chaos.plugin) run user projects

ROOT = Path(__file__).resolve().parent.parent


# Slots for the searches of the suite (harness/slots.py): their small-scope passes run this many at a
# time. Three on a 2-core machine: measured, four judged every schedule as one slot did.
TEST_SLOTS = 3
_slots: list = []


_busy: list[stress.BusyLoops] = []


def pytest_configure(config: pytest.Config) -> None:
    """``PGJC_STRESS=N``: N busy loops beside the whole session (``tests/stress.py``), started by pytest's
    main process only -- an xdist worker has ``workerinput`` -- and stopped in :func:`pytest_unconfigure`."""
    n = stress.count()
    if n and not hasattr(config, "workerinput"):
        _busy.append(stress.BusyLoops(n).start())


def pytest_unconfigure(config: pytest.Config) -> None:
    while _busy:
        _busy.pop().stop()


def pytest_report_header(config: pytest.Config) -> str | None:
    if not _busy:
        return None
    pids = ", ".join(map(str, _busy[0].pids))
    loops = "1 busy loop" if _busy[0].n == 1 else f"{_busy[0].n} busy loops"
    return f"{stress.ENV}: {loops} beside the suite (pids {pids})"


@pytest.fixture(autouse=True)
def _pytester_runs_outside_xdist(request, monkeypatch):
    """A user's project run by ``pytester`` is not one of this suite's xdist workers: without this it
    inherits ``PYTEST_XDIST_WORKER``, and a plugin that refuses xdist (pytest-benchmark) warns, which
    this suite's ``filterwarnings = error`` turns into an internal error of that run."""
    if "pytester" in request.fixturenames:
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def database():
    from pg_job_chaos.harness.postgres import provision
    from pg_job_chaos.harness.slots import Slots

    # The slots are cloned first: a template database must have no session open while it is copied.
    with provision() as db, Slots(db, TEST_SLOTS) as slots:
        _slots.append(slots)
        yield db
        _slots.clear()


@pytest.fixture(scope="session")
def runner(database):
    """The session's runner; ``runner.slots`` runs batches of schedules at once (pass
    :func:`parallel_options` to a search)."""
    from pg_job_chaos.harness.runner import Runner

    with Runner(database) as r:
        r.slots = _slots[0]
        yield r


def parallel_options(runner) -> dict:
    """What a search in the suite passes to run its small-scope pass on the session's slots."""
    return {"run_many": runner.slots.run_many, "parallel": runner.slots.n}


def run_cli(*args: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python run.py ARGS`` as a user would run it; never hangs the suite."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env=env, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def compare_cli(tmp_path_factory):
    """One ``--compare`` through the command line, writing ``c.json`` and ``compare.html`` into the
    directory it returns with the process: ``tests/integration/test_cli.py`` reads the JSON,
    ``test_html.py`` opens the page (one compare where two cost the suite a minute)."""
    d = tmp_path_factory.mktemp("compare")
    r = run_cli("--compare", "--designs", "one-transaction,lease-heartbeat", "--faults", "crash",
                "--time-scale", "0.2", "--examples", "3", "--seed", "2", "--workers", "1",
                "--json", str(d / "c.json"), "--html", str(d / "compare.html"), timeout=600)
    return r, d


def double_imports(modules: dict[str, str | None], root: Path = ROOT) -> list[str]:
    """The double-import trap in *modules* (name -> file, as ``sys.modules`` has them): a layer
    imported under its bare name (``core`` beside ``pg_job_chaos.core``: two copies of every class and
    registry, which ``isinstance`` and module-level state tell apart), or one file of the checkout
    loaded as two modules (``pg_job_chaos.pg_job_chaos`` is the package again, through the checkout's
    extended ``__path__``)."""
    out = [f"{name} (bare layer name, from {file})" for name, file in sorted(modules.items())
           if name.partition(".")[0] in pg_job_chaos.LAYERS]
    by_file: dict[Path, list[str]] = defaultdict(list)
    for name, file in modules.items():
        if file and not name.startswith("__"):  # __main__, __mp_main__: a script is its own module
            path = Path(file).resolve()
            if path.is_relative_to(root) and not _installed(path, root):
                by_file[path].append(name)
    out += [f"{' and '.join(sorted(names))}: one file, {path.relative_to(root)}, imported twice"
            for path, names in sorted(by_file.items()) if len(names) > 1]
    return out


def _installed(path: Path, root: Path) -> bool:
    """Whether *path* is an installed package's file, not the checkout's: under a ``site-packages`` or
    inside a virtual environment kept in the checkout (a folder holding ``pyvenv.cfg``, as ``.venv/``
    does), where pytest's own modules may well be loaded under two names."""
    rel = path.relative_to(root)
    return "site-packages" in rel.parts or any((root / Path(*rel.parts[:i]) / "pyvenv.cfg").is_file()
                                               for i in range(1, len(rel.parts)))


def loaded_modules() -> dict[str, str | None]:
    return {name: getattr(m, "__file__", None) for name, m in list(sys.modules.items())}


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if anything in it imported a layer under its bare name or a module twice.

    No test fails, so the run's exit status is set here (pytest returns ``session.exitstatus`` after
    this hook): 1, unless the run already ended worse."""
    found = double_imports(loaded_modules())
    if not found:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["the double-import trap: product modules imported outside pg_job_chaos (use "
             "'from pg_job_chaos.X import ...' in tests, relative imports in product code):", *found]
    if reporter is not None:
        reporter.write("\n")  # after the progress dots
        reporter.write_sep("=", "double imports", red=True)
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
