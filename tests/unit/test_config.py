"""``[tool.pg-job-chaos]`` in a project's ``pyproject.toml``: found from the current directory up, typed,
below the command line's flags, and errors that name the key and the file (no database)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.harness.cli import config
from pg_job_chaos.harness.cli import main as cli
from pg_job_chaos.harness.cli.parser import DEFAULT_EXAMPLES
from pg_job_chaos.workers import parse_options
from tests.conftest import run_cli

FULL = """
faults = ["crash", "overrun"]
examples = 20
fail-on = "safety"
allow = ["at-most-once-effects"]
design = "lease-outbox"
design-option = {poll = "0.1", fenced = true}
time_scale = 0.25
tenant-mode = "session"
strict = true
budget = 30
workers = 2
seed = 5
parallel = 2
pooler = "pgbouncer:session"
pg-version = 15
postgres = "docker"
json = "reports/s.json"
out = "saved"
example-db = "redis://127.0.0.1:6379/0"
shard = "2/4"
"""


@pytest.fixture(autouse=True)
def _sigterm():
    """``main()`` installs its SIGTERM handler; the suite's process keeps its own."""
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


def project(folder: Path, settings: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pyproject.toml"
    path.write_text(f'[project]\nname = "app"\n\n[tool.pg-job-chaos]\n{settings}')
    return path


def parse(*argv: str):
    return cli.parse(cli.normalise(list(argv)))


def test_every_setting_reaches_the_arguments_from_a_folder_below(tmp_path, monkeypatch):
    path = project(tmp_path, FULL)
    below = tmp_path / "src" / "app"
    below.mkdir(parents=True)
    monkeypatch.chdir(below)
    args = parse("--design", "lease")  # the card's form: search
    assert args.subcommand == "search" and args.config_file == path
    assert args.design == "lease"  # the command line wins
    assert (args.faults, args.examples, args.fail_on, args.allow) == ("crash,overrun", 20, "safety",
                                                                      "at-most-once-effects")
    assert parse_options(args.design_option) == {"poll": "0.1", "fenced": "true"}
    assert (args.time_scale, args.tenant_mode, args.strict, args.budget) == (0.25, "session", True, 30.0)
    assert (args.workers, args.seed, args.parallel, args.pooler, args.pg_version, args.postgres) == \
        (2, 5, 2, "pgbouncer:session", 15, "docker")
    # Paths are the settings file's folder's, as ruff's and pytest's are; a URL is left as it is.
    assert (args.json, args.out) == (str(tmp_path / "reports/s.json"), str(tmp_path / "saved"))
    assert args.example_db == "redis://127.0.0.1:6379/0" and args.shard == (1, 4)
    assert "design" not in args.config_keys and "examples" in args.config_keys


def test_the_command_line_wins_and_adds_design_options(tmp_path, monkeypatch):
    project(tmp_path, 'examples = 20\nfaults = "crash"\ndesign-option = ["poll=0.1", "x=1"]\nstrict = true\n')
    monkeypatch.chdir(tmp_path)
    args = parse("search", "--examples", "3", "--faults", "overrun", "--design-option", "poll=0.5")
    assert (args.examples, args.faults, args.strict) == (3, "overrun", True)
    assert parse_options(args.design_option) == {"poll": "0.5", "x": "1"}
    assert args.config_keys == ["strict"]
    assert parse("search", "--no-config").examples == DEFAULT_EXAMPLES


def test_replay_keeps_what_its_schedule_says_and_compare_takes_designs(tmp_path, monkeypatch):
    project(tmp_path, 'design = "lease"\ntime-scale = 2\npooler = "pgbouncer"\nfail-on = "safety"\n'
                      'faults = "crash"\ndesigns = ["lease", "mine.py:Mine"]\n')
    monkeypatch.chdir(tmp_path)
    r = parse("replay", "s.json")
    assert (r.design, r.time_scale, r.pooler, r.fail_on) == (None, None, None, "safety")
    c = parse("compare")
    assert (c.designs, c.faults, c.fail_on) == (f"lease,{tmp_path / 'mine.py'}:Mine", "crash", "safety")


def test_find_takes_the_first_pyproject_with_the_table(tmp_path):
    outer = project(tmp_path, "examples = 2\n")
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "inner"\n')  # no table: passed over
    assert config.find(inner) == outer
    inner_too = project(inner / "sub", "examples = 3\n")
    assert config.find(inner / "sub") == inner_too


def test_config_and_no_config(tmp_path, monkeypatch):
    project(tmp_path, "examples = 20\n")
    other = project(tmp_path / "elsewhere", "examples = 7\n")
    monkeypatch.chdir(tmp_path)
    args = parse("search", "--config", str(other))
    assert args.examples == 7 and args.config_file == other
    assert parse("search", "--no-config").config_file is None
    with pytest.raises(UsageError, match="--config nope.toml: no such file"):
        parse("search", "--config", "nope.toml")
    (tmp_path / "bare.toml").write_text("[tool.ruff]\n")
    with pytest.raises(UsageError, match=r"bare.toml: the file has no \[tool.pg-job-chaos\] table"):
        parse("search", "--config", "bare.toml")


@pytest.mark.parametrize(("settings", "needle"), [
    ("exampels = 3\n", "unknown key 'exampels'; known keys: allow, budget, design, design-option, designs, "),
    ('examples = "ten"\n', "examples = 'ten': expected an integer"),
    ("examples = true\n", "examples = True: expected an integer"),
    ('time-scale = "fast"\n', "time-scale = 'fast': expected a number"),
    ('strict = "yes"\n', "strict = 'yes': expected true or false"),
    ("faults = 3\n", "faults = 3: expected a string or a list of strings"),
    ("design = [\"lease\"]\n", "design = ['lease']: expected a string"),
    ('design-option = ["poll"]\n', 'design-option = [\'poll\']: expected a table {key = "value"}'),
    ('shard = "5/2"\n', "shard = '5/2': --shard '5/2': I must be between 1 and N"),
    ('fail-on = "safety"\nfail_on = "all"\n', "sets fail-on twice ('fail-on' and 'fail_on')"),
    ("examples = \n", "not valid TOML"),
])
def test_a_bad_setting_names_the_key_and_the_file(tmp_path, monkeypatch, capsys, settings, needle):
    path = project(tmp_path, settings)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as info:
        parse("search")
    assert needle in str(info.value) and str(path) in str(info.value), info.value
    assert cli.main(["replay", "s.json"]) == 2  # every key is checked, also those replay does not take
    err = capsys.readouterr().err
    assert err.startswith(f"pg-job-chaos: {path}") and needle in err and err.count("\n") == 1, err


def test_the_tool_table_must_be_a_table(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool]\npg-job-chaos = "lease"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"tool.pg-job-chaos must be a table"):
        parse("search")


def test_a_value_the_command_checks_is_blamed_on_the_file(tmp_path, monkeypatch, capsys):
    """The value reached the command (its own check refused it), and the message says where it came from."""
    path = project(tmp_path, "examples = 0\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["search"]) == 2
    err = capsys.readouterr().err
    assert err == \
        f"pg-job-chaos: --examples must be at least 1 (examples from [tool.pg-job-chaos] in {path})\n"
    assert cli.main(["search", "--examples", "0", "--no-config"]) == 2
    assert capsys.readouterr().err == "pg-job-chaos: --examples must be at least 1\n"


def test_verbose_says_which_file_was_read(tmp_path, monkeypatch, capsys):
    path = project(tmp_path, 'faults = "crash"\n')
    monkeypatch.chdir(tmp_path)
    assert cli.main(["search", "--list-faults"]) == 0
    assert "settings from" not in capsys.readouterr().err
    assert cli.main(["search", "-v", "--list-faults"]) == 0
    assert f"pg-job-chaos: settings from {path} [tool.pg-job-chaos]: faults\n" in capsys.readouterr().err
    cli._logging(0)


def test_an_unknown_fault_in_the_file_is_a_usage_error_before_any_server(tmp_path):
    """Through the real command line, in its own process: the file's faults reach the search's checks."""
    path = project(tmp_path, 'faults = ["crash", "nosuch"]\nexamples = 1\n')
    r = run_cli("search", "--design", "lease", timeout=60, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unknown fault 'nosuch'" in r.stderr and f"(faults from [tool.pg-job-chaos] in {path})" in r.stderr
    assert "Traceback" not in r.stderr and "PostgreSQL:" not in r.stderr


def test_the_pytest_plugin_reads_the_table_below_its_own_options(pytester: pytest.Pytester):
    pytester.makepyprojecttoml('[tool.pg-job-chaos]\nexamples = 7\ntime-scale = 0.3\nfail-on = "safety"\n'
                               'allow = ["at-most-once-effects"]\nseed = 9\nbudget = 12\nout = "saved"\n'
                               'faults = "crash"\n')
    pytester.makeini("[pytest]\nchaos_time_scale = 0.25\n")
    pytester.makepyfile(test_opts=f"""
        from pg_job_chaos.plugin import option

        def test_values(pytestconfig):
            assert option(pytestconfig, "examples") == 7          # the pyproject table
            assert option(pytestconfig, "time_scale") == 0.25     # ini wins over the table
            assert option(pytestconfig, "seed") == 4              # the command line wins
            assert option(pytestconfig, "fail_on") == "safety"
            assert option(pytestconfig, "allow") == "at-most-once-effects"
            assert option(pytestconfig, "budget") == 12.0
            assert option(pytestconfig, "out") == {str(pytester.path / "saved")!r}
            assert option(pytestconfig, "postgres") == "local"    # the default
    """)
    r = pytester.runpytest("-p", "pg_job_chaos.plugin", "--chaos-seed", "4")
    r.assert_outcomes(passed=1)


def test_the_pytest_plugin_reports_a_bad_table(pytester: pytest.Pytester):
    pytester.makepyprojecttoml('[tool.pg-job-chaos]\nexamples = "many"\n')
    pytester.makepyfile(test_x="""
        from pg_job_chaos.plugin import option

        def test_x(pytestconfig):
            option(pytestconfig, "examples")
    """)
    r = pytester.runpytest("-p", "pg_job_chaos.plugin")
    assert "examples = 'many': expected an integer" in r.stdout.str() + r.stderr.str()
