"""The pytest plugin's options, ini settings and markers, in a user project (no database)."""

from __future__ import annotations

import tomllib

import pytest

from tests.conftest import ROOT

PLUGIN = ("-p", "pg_job_chaos.plugin")


def test_the_entry_point_names_the_plugin_module():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"pg_job_chaos.plugin": "pg_job_chaos.plugin"}
    assert "pg_job_chaos" in meta["tool"]["setuptools"]["packages"]


def test_options_and_markers_are_registered(pytester: pytest.Pytester):
    help_ = pytester.runpytest(*PLUGIN, "--help")
    for flag in ("--chaos-examples", "--chaos-time-scale", "--chaos-seed", "--chaos-postgres", "--chaos-out",
                 "--chaos-html", "--chaos-strict"):
        assert flag in help_.stdout.str()
    markers = pytester.runpytest(*PLUGIN, "--markers").stdout.str()
    assert "chaos_config(**defaults)" in markers and "@pytest.mark.chaos_postgres" in markers


def test_command_line_wins_over_ini_and_no_server_starts_unasked(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nchaos_examples = 3\nchaos_time_scale = 0.25\nchaos_seed = 7\n")
    pytester.makepyfile(test_opts="""
        from pg_job_chaos.plugin import option

        def test_values(pytestconfig):
            assert option(pytestconfig, "examples") == 4          # command line
            assert option(pytestconfig, "time_scale") == 0.25     # ini
            assert option(pytestconfig, "seed") == 7
            assert option(pytestconfig, "postgres") == "local"    # default
    """)
    r = pytester.runpytest(*PLUGIN, "--chaos-examples", "4", "--strict-markers")
    r.assert_outcomes(passed=1)


def test_tests_using_the_database_carry_the_marker(pytester: pytest.Pytester):
    pytester.makepyfile(test_m="""
        def test_db(chaos_run):
            raise AssertionError("never runs: deselected")

        def test_plain():
            pass
    """)
    r = pytester.runpytest(*PLUGIN, "-m", "not chaos_postgres", "--strict-markers")
    r.assert_outcomes(passed=1, deselected=1)


def test_a_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nchaos_examples = many\n")
    pytester.makepyfile(test_x="""
        from pg_job_chaos.plugin import option

        def test_x(pytestconfig):
            option(pytestconfig, "examples")
    """)
    r = pytester.runpytest(*PLUGIN)
    assert "chaos_examples = 'many': expected int" in r.stdout.str() + r.stderr.str()


def test_the_entry_point_loads_it_and_an_explicit_p_is_harmless(pytester: pytest.Pytester, monkeypatch):
    # An installed distribution's entry point, as pip would write it (pytest reads dist-info on sys.path).
    dist = pytester.path / "site" / "pg_job_chaos_probe-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pg-job-chaos-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\npg_job_chaos.plugin = pg_job_chaos.plugin\n")
    monkeypatch.setenv("PYTHONPATH", f"{dist.parent}:{ROOT}")
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    pytester.makepyfile(test_m="def test_plain(chaos_run):\n    pass\n")
    for extra in ((), PLUGIN):
        r = pytester.runpytest_subprocess(*extra, "--strict-markers", "-m", "not chaos_postgres", timeout=120)
        r.assert_outcomes(deselected=1)
