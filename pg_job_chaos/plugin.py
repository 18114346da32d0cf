"""The pytest plugin (entry point ``pytest11``: ``pg_job_chaos.plugin``).

Fixtures, all prefixed ``chaos_`` so they never meet a project's own ``database`` or ``runner``:

``chaos_database`` (session)
    a throwaway PostgreSQL 17.10 with the article's schema, or the server ``--chaos-postgres``
    names (a DSN, ``docker[:IMAGE]``); everything is removed at the end of the session. A search or
    run whose faults need more of the server (``faults/catalogue.py``: a ``restart`` needs durable
    settings) gets a server of its own with it, started once, as the command line's would; a fault
    that needs the local server is refused on another.
``chaos_session`` (session)
    a :class:`~pg_job_chaos.session.ChaosSession`: ``.search(...)``, ``.run(schedule)``,
    ``.replay(file)`` return a :class:`~pg_job_chaos.ChaosResult`. Use this one in ``@given`` tests
    (Hypothesis refuses function-scoped fixtures there).
``chaos_run`` (function)
    the same, with the test's ``@pytest.mark.chaos_config(design=..., faults=..., ...)`` defaults.

Markers: ``chaos_config(**defaults)``; ``chaos_postgres`` is put on every test that uses these
fixtures, so ``-m "not chaos_postgres"`` leaves out the tests that need a server.

Options (command line, or ini without the dashes: ``chaos_examples = 5``): ``--chaos-examples``,
``--chaos-time-scale``, ``--chaos-seed``, ``--chaos-postgres``, ``--chaos-out``, ``--chaos-html``
(a directory: one HTML page per search that violated something), ``--chaos-budget`` (seconds),
``--chaos-fail-on`` / ``--chaos-allow`` (the properties whose violation fails ``assert_held()`` and
that a search shrinks: names or groups, as the command line's ``--fail-on`` / ``--allow``),
``--chaos-strict`` (``assert_held`` fails on ``unknown`` too, and on a fault that struck in no run).
Below both, the ``[tool.pg-job-chaos]`` table of the first ``pyproject.toml`` that has one, from the
rootdir up (the command line's settings, :mod:`harness.cli.config`) gives ``fail-on``, ``allow``,
``examples``, ``time-scale``, ``budget``, ``seed``, ``postgres`` and ``out``.
A search takes ``design_options`` (the ``--design-option`` pairs) in ``chaos_session.search(...)`` and in
``chaos_config``. Searches and their reports are the command line's (:mod:`harness.report.build`).

Hazard: pytest imports this module in every session of every project that has pg-job-chaos
installed, so it imports nothing heavy at module level; the harness loads when a fixture is used.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = ("chaos_database", "chaos_session", "chaos_run")
OPTIONS = {  # name: (type, default, help)
    "examples": (int, "10", "schedules a chaos search generates"),
    "time_scale": (float, "0.5", "multiply every duration of a chaos run"),
    "seed": (int, "", "Hypothesis seed for chaos searches (default: random)"),
    "postgres": (str, "local", "local (a throwaway server) | a DSN | docker[:IMAGE]"),
    "out": (str, "chaos-out", "where counterexample schedules are saved (relative to the rootdir)"),
    "html": (str, "", "a directory for one HTML page per violating search (relative to the rootdir)"),
    "budget": (float, "", "seconds after which a chaos search starts no new schedule (default: none)"),
    "fail_on": (str, "", "only these properties (names or groups: safety, liveness, resources) "
                         "fail assert_held"),
    "allow": (str, "", "these properties' violations do not fail assert_held (names or groups)"),
}
TRUE = ("1", "true", "yes", "on")
FROM_FILE = ("examples", "time_scale", "seed", "postgres", "out", "budget", "fail_on", "allow")
_FILE = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pg-job-chaos", "chaos searches against PostgreSQL job workers")
    for name, (tp, default, help_) in OPTIONS.items():
        flag = "--chaos-" + name.replace("_", "-")
        group.addoption(flag, dest=f"chaos_{name}", type=tp, default=None,
                        help=f"{help_} (ini: chaos_{name}; default {default or 'none'})")
        parser.addini(f"chaos_{name}", help=help_, default="")  # unset: the pyproject table, then *default*
    group.addoption("--chaos-strict", dest="chaos_strict", action="store_true", default=None,
                    help="assert_held fails on a property that could not decide, too (ini: chaos_strict)")
    parser.addini("chaos_strict", help="assert_held fails on unknown too", type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos_config(**defaults): defaults for chaos_run in this test "
                                       "(design, faults, tenant_mode, examples, time_scale, seed, workers, "
                                       "design_options, budget)")
    config.addinivalue_line("markers", "chaos_postgres: uses pg-job-chaos's database (added automatically)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if set(FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker("chaos_postgres")


def option(config: pytest.Config, name: str):
    """The command line's value, else the ini file's, else the ``[tool.pg-job-chaos]`` table's, else the
    default, converted; None for none of them."""
    value = config.getoption(f"chaos_{name}")
    if value is not None:
        return value
    tp, default, _ = OPTIONS[name]
    raw = config.getini(f"chaos_{name}")
    if raw in ("", None):
        value = _from_file(config).get(name)
        if value is not None:
            return value
        raw = default
    if raw == "":
        return None
    try:
        return tp(raw)
    except ValueError:
        raise pytest.UsageError(f"ini option chaos_{name} = {raw!r}: expected {tp.__name__}") from None


def _from_file(config: pytest.Config) -> dict:
    """The settings of :data:`FROM_FILE` that ``[tool.pg-job-chaos]`` gives (read once per session)."""
    if _FILE not in config.stash:
        from .core.errors import UsageError
        from .harness.cli import config as settings
        from .harness.cli.parser import parser

        try:
            found = settings.locate(None, False, Path(config.rootpath))
            values = settings.defaults(found[1], found[0], parser().commands, "search") if found else {}
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.stash[_FILE] = {k: v for k, v in values.items() if k in FROM_FILE}
    return config.stash[_FILE]


@pytest.fixture(scope="session")
def _chaos_servers(pytestconfig: pytest.Config):
    """The session's servers (``harness.session.Servers``): the one ``--chaos-postgres`` names, and one
    more for each set of server needs a run's faults declare, each started when first used."""
    from .core.errors import UsageError
    from .harness.postgres import ServerSpec
    from .harness.session import Servers

    try:
        spec = ServerSpec(option(pytestconfig, "postgres") or "local")
    except UsageError as exc:
        raise pytest.UsageError(f"--chaos-postgres: {exc}") from None
    with Servers(spec) as servers:
        yield servers


@pytest.fixture(scope="session")
def chaos_database(_chaos_servers):
    """A provisioned database (``harness.postgres.Database``) for the whole session."""
    return _chaos_servers.database()


@pytest.fixture(scope="session")
def chaos_session(pytestconfig: pytest.Config, _chaos_servers):
    from .core.errors import UsageError
    from .properties import gate as property_gate
    from .session import ChaosSession, Settings

    def gate(fail_on, allow):
        try:
            return property_gate(fail_on, allow)
        except UsageError as exc:
            raise pytest.UsageError(str(exc).replace("--fail-on", "--chaos-fail-on")
                                    .replace("--allow", "--chaos-allow")) from None

    examples = option(pytestconfig, "examples")
    scale = option(pytestconfig, "time_scale")
    if examples is not None and examples < 1 or scale is not None and scale <= 0:
        raise pytest.UsageError("--chaos-examples must be at least 1 and --chaos-time-scale greater than 0")
    root = Path(pytestconfig.rootpath)
    html = option(pytestconfig, "html")
    strict = pytestconfig.getoption("chaos_strict") or pytestconfig.getini("chaos_strict")
    settings = Settings(examples=examples or 10, time_scale=scale or 0.5, seed=option(pytestconfig, "seed"),
                        out=root / (option(pytestconfig, "out") or "chaos-out"), root=root,
                        html=root / html if html else None, strict=bool(strict),
                        budget=option(pytestconfig, "budget"),
                        gate=gate(option(pytestconfig, "fail_on"), option(pytestconfig, "allow")))
    return ChaosSession(_chaos_servers.runner(), settings, servers=_chaos_servers)


@pytest.fixture
def chaos_run(request: pytest.FixtureRequest, chaos_session):
    """:class:`~pg_job_chaos.session.ChaosSession` with this test's ``chaos_config`` marker defaults
    (the closest marker wins)."""
    defaults: dict = {}
    for mark in reversed(list(request.node.iter_markers("chaos_config"))):
        defaults.update(mark.kwargs)
    return chaos_session.with_defaults(**defaults)
