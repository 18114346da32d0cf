"""``pg-job-chaos new-design NAME``: the hosted design file it writes, and what it refuses (no database;
``tests/integration/test_scaffold.py`` runs the file it writes)."""

from __future__ import annotations

import ast
import signal

import pytest

from pg_job_chaos.harness.cli import main as cli
from pg_job_chaos.harness.cli import scaffold
from pg_job_chaos.workers import hosted

SIX = ("install", "reset", "enqueue", "pending", "final_states", "run_worker")


@pytest.fixture(autouse=True)
def _sigterm():
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


def test_the_template_is_filled_in_as_a_hosted_design_with_the_six_calls():
    text = scaffold.render("my-queue")
    assert "$" not in text  # every placeholder filled
    tree = ast.parse(text)
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert cls.name == "MyQueue" and ast.unparse(cls.bases[0]) == "hosted.HostedDesign"
    assert [f.name for f in cls.body if isinstance(f, ast.FunctionDef)] == list(SIX)
    assert 'name = "my-queue"' in text and "create table if not exists my_queue_jobs" in text
    assert "hosted.run_job(ctx, args, attempt=attempts)" in text
    for said in ("claimed", "ctx.lease", "ctx.poll", "ctx.heartbeat", "real seconds", "self.lease",
                 "hosted.record_ids", "hosted.schedule_ids", "Your claim", "Your finish", "Your failure"):
        assert said in text, said
    assert all(m in hosted.HostedDesign.__dict__ for m in SIX)  # the six it overrides are the protocol's


def test_new_design_writes_the_file_and_never_overwrites_it(tmp_path, capsys):
    out = tmp_path / "designs"  # made when missing
    assert cli.main(["new-design", "my_queue", "--out", str(out)]) == 0
    path = out / "my_queue.py"
    assert path.read_text() == scaffold.render("my_queue")
    assert f"pg-job-chaos search --design {path}:MyQueue --examples 1" in capsys.readouterr().out
    path.write_text("# mine\n")
    assert cli.main(["new-design", "my_queue", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (f"pg-job-chaos: {path} exists; not overwriting it (remove it, or "
                                       "choose another NAME or --out)\n")
    assert path.read_text() == "# mine\n"


@pytest.mark.parametrize(("name", "needle"), [
    ("1queue", "must be a Python module name"),
    ("class", "must be a Python module name"),
    ("my queue", "must be a Python module name"),
    ("json", "a module 'json' is already importable; json.py would shadow it"),
])
def test_a_name_that_cannot_be_a_module_is_a_usage_error(tmp_path, capsys, name, needle):
    assert cli.main(["new-design", name, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pg-job-chaos: ") and needle in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_new_design_is_a_subcommand_with_help_and_version(capsys):
    assert cli.main(["new-design", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: pg-job-chaos new-design ")
    assert cli.main(["new-design", "--version"]) == 0
    assert cli.main(["--help"]) == 0 and "new-design" in capsys.readouterr().out
