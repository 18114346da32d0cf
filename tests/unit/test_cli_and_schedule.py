"""User mistakes: one clear line, exit 2, nothing started. Schedules round-trip through JSON."""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

import pg_job_chaos
from pg_job_chaos.core import sqlfile
from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule, Timing
from pg_job_chaos.faults import CATALOGUE, parse_faults
from pg_job_chaos.harness.engine.schedules import load
from tests.conftest import run_cli


def test_unknown_fault_lists_the_known_ones():
    r = run_cli("--design", "lease", "--faults", "crash,meteor", timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "unknown fault 'meteor'" in r.stderr and all(name in r.stderr for name in CATALOGUE)


@pytest.mark.parametrize(("args", "needle"), [
    (["--design", "nope"], "unknown design 'nope'"),
    (["--design", "os:path"], "does not fit the design protocol"),
    (["--tenant-mode", "global"], "unknown tenant mode 'global'"),
    (["--examples", "0"], "--examples"),
    (["--time-scale", "-1"], "--time-scale"),
    (["--postgres", "mysql"], "expected local, docker"),
    (["--bogus"], "unrecognized arguments"),
    (["--allow", "speed"], "--allow 'speed': not a property or group"),
    (["--fail-on", "horizon", "--allow", "resources"], "leave no property that can fail the run"),
])
def test_usage_errors_exit_2_in_one_line(args, needle):
    r = run_cli(*args, timeout=60)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def _write(tmp_path, data) -> str:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(p)


@pytest.mark.parametrize(("data", "needle"), [
    ("{not json", "is not JSON"),
    ({"jobs": []}, "field jobs: at least one job"),
    ({"jobs": [{"id": 1, "fault": "kill"}]}, "field jobs[0].fault: 'kill' is not a job fault"),
    ({"jobs": [{"id": 1, "duration": "long"}]}, "field jobs[0].duration: expected float"),
    ({"jobs": [{"id": 1}], "workers": "two"}, "field workers: expected int"),
    ({"jobs": [{"id": 1}], "events": [{"fault": "kill", "job": 7}]}, "field events[0].job: no job 7"),
    ({"jobs": [{"id": 1, "point": "lunch"}]}, "field jobs[0].point: unknown point 'lunch'"),
    ({"jobs": [{"id": 1}], "colour": "red"}, "unknown field 'colour'"),
    ({"jobs": [{"id": 1}], "tenant_mode": "global"}, "field tenant_mode: unknown mode"),
])
def test_malformed_schedule_names_the_field(tmp_path, data, needle):
    path = _write(tmp_path, data)
    with pytest.raises(UsageError, match=None) as exc:
        load(path)
    assert needle in str(exc.value)
    r = run_cli("--replay", path, timeout=60)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_missing_schedule_file(tmp_path):
    r = run_cli("--replay", str(tmp_path / "none.json"), timeout=60)
    assert r.returncode == 2 and "cannot read schedule file" in r.stderr


def test_schedule_round_trips_through_json(tmp_path):
    s = Schedule(jobs=(JobSpec(1, tenant=None, fault="crash", point="after-effect"),
                       JobSpec(2, duration=0.3)),
                 workers=2,
                 events=(Event("pause", 2, duration=3.0), Event("horizon", 1, variant="repeatable-read")),
                 design="lease-fenced", tenant_mode="session", time_scale=0.1, timing=Timing(lease=2.0),
                 dequeues=7)
    p = tmp_path / "s.json"
    p.write_text(s.to_json())
    assert load(p) == s
    assert s.faults() == ["crash", "horizon", "pause"]
    assert s.seconds(2.0) == pytest.approx(0.2)


def test_parse_faults():
    assert [f.name for f in parse_faults("crash, overrun,crash")] == ["crash", "overrun"]
    assert parse_faults("") == ()
    with pytest.raises(UsageError, match="known faults"):
        parse_faults("nope")


def test_sqlfile_parser():
    q = sqlfile.parse("-- name: a\n-- the first\nselect 1;\n\n-- name: b\nselect %(x)s;\n")
    assert q == {"a": "select 1;", "b": "select %(x)s;"}
    with pytest.raises(ValueError, match="defined twice"):
        sqlfile.parse("-- name: a\nselect 1;\n-- name: a\nselect 2;\n")
    with pytest.raises(ValueError, match="no statement"):
        sqlfile.parse("-- name: a\n-- only a comment\n")


def test_a_design_naming_a_query_its_sql_file_lacks_fails_at_import(tmp_path, monkeypatch):
    (tmp_path / "my_design_sql.sql").write_text("-- name: claim\nselect 1;\n")
    (tmp_path / "my_design.py").write_text(
        "from pg_job_chaos.core import sqlfile\n"
        "Q = sqlfile.load(__file__, 'my_design_sql.sql', 'claim', 'finish')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(LookupError, match=r"missing queries \['finish'\]"):
        importlib.import_module("my_design")
    from pg_job_chaos.workers.builtin import lease

    with pytest.raises(LookupError, match="has no query named 'no_such_statement'"):
        lease.Q.no_such_statement  # noqa: B018


def test_sqlfile_params():
    assert sqlfile.params("select %(a)s, %(b)s where x = %(a)s and y like '%%'") == {"a", "b"}
    assert sqlfile.params("select 1") == set()


def _sql_calls(unimported: list[str]):
    """Every ``X.execute(Q.name, {...})`` / ``executemany`` with a dict literal in the project:
    (file, line, statement, the dict's keys). A module whose queue library is not installed (an
    adapter without the ``libraries`` extra) cannot be imported: its path goes to *unimported*."""
    root = Path(__file__).resolve().parents[2]
    for path in sorted(root.glob("*/**/*.py")):
        if path.parts[len(root.parts)] in ("tests", "benchmarks"):
            continue
        module = None
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("execute", "executemany") and node.args):
                continue
            q = node.args[0]
            if not (isinstance(q, ast.Attribute) and isinstance(q.value, ast.Name)):
                continue
            params = node.args[1] if len(node.args) > 1 else None
            if isinstance(params, ast.ListComp):
                params = params.elt
            if params is not None and not isinstance(params, ast.Dict):
                continue
            if module is None:
                rel = path.relative_to(root).with_suffix("")
                prefix = ("pg_job_chaos",) if rel.parts[0] in pg_job_chaos.LAYERS else ()
                try:
                    module = importlib.import_module(".".join((*prefix, *rel.parts)))
                except ImportError as exc:
                    if (exc.name or "").startswith("pg_job_chaos"):
                        raise
                    unimported.append(f"{path.relative_to(root)} ({exc.name})")
                    break
            queries = getattr(module, q.value.id, None)
            if not isinstance(queries, sqlfile.Queries):
                continue
            keys = {k.value for k in params.keys} if params is not None else set()
            yield f"{path.relative_to(root)}:{node.lineno}", getattr(queries, q.attr), keys


def test_every_query_call_passes_exactly_the_parameters_its_statement_names():
    unimported: list[str] = []
    calls = list(_sql_calls(unimported))
    assert len(calls) > 20  # the scan finds the designs' and the supervisor's calls
    bad = [f"{where}: passes {sorted(keys)}, statement names {sorted(sqlfile.params(stmt))}"
           for where, stmt, keys in calls if keys != sqlfile.params(stmt)]
    assert not bad, "\n".join(bad)
    if unimported:
        pytest.skip(f"the rest held; not checked, their libraries not installed "
                    f"(pip install -e '.[libraries]'): {', '.join(unimported)}")


def test_a_statement_replaced_by_its_version_variant(tmp_path):
    (tmp_path / "q.sql").write_text("-- name: read\nselect 1;\n-- name: read_0x\nselect 0;\n")
    q = sqlfile.load(str(tmp_path / "x.py"), "q.sql", "read", "read_0x")
    old = q.replacing(read="read_0x")
    assert (q.read, old.read, old.read_0x) == ("select 1;", "select 0;", "select 0;")
    with pytest.raises(KeyError):
        q.replacing(read="nope")
