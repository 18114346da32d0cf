"""The CI examples users copy: the workflow parses, and every example runs the CI guide's commands
(docs/guides/ci.md, "The commands"): a search on lease-outbox, gated on safety, that passes there and
fails on lease naming the property (the guide shows both)."""

from __future__ import annotations

import re
import shlex

import yaml

from pg_job_chaos.harness.cli import main as cli
from pg_job_chaos.harness.engine import search
from tests.conftest import ROOT

CI = ROOT / "examples" / "ci"


GUIDE = ROOT / "docs" / "guides" / "ci.md"


def guide_commands() -> list[str]:
    """The commands of the CI guide's first ``sh`` block under "The commands"."""
    section = GUIDE.read_text().split("## The commands", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _lines(script: str) -> list[str]:
    return [ln.strip() for ln in script.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_the_workflow_parses_and_runs_the_guide_s_commands():
    wf = yaml.safe_load((CI / "github-actions.yml").read_text())
    assert wf.get("on", wf.get(True))  # YAML 1.1 reads the key "on" as True
    steps = wf["jobs"]["chaos"]["steps"]
    runs = [ln for s in steps if "run" in s for ln in _lines(s["run"])]
    assert runs == guide_commands()
    uses = {s["uses"].split("@")[0]: s for s in steps if "uses" in s}
    assert uses["actions/upload-artifact"]["with"]["path"] == "chaos-out/"
    assert uses["actions/upload-artifact"]["if"] == "always()"
    # the directory the search keeps Hypothesis's example database in (without $XDG_CACHE_HOME)
    assert uses["actions/cache"]["with"]["path"] == f"~/.cache/{search.CACHE_DIR.name}"


def test_the_shell_form_runs_the_guide_s_commands():
    script = (CI / "chaos.sh").read_text()
    assert script.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in script
    assert [ln for ln in _lines(script) if not ln.startswith("set ")] == guide_commands()


def test_the_search_command_is_one_the_cli_accepts():
    search = next(c for c in guide_commands() if c.startswith("pg-job-chaos "))
    args = cli.parser().parse_args(cli.normalise(shlex.split(search)[1:]))
    assert args.subcommand == "search" and args.strict and args.junit.startswith("chaos-out/")
    assert args.html.startswith("chaos-out/") and args.json.startswith("chaos-out/")
    # Green by construction on a design that keeps every safety property under these faults, not red
    # by construction (an at-least-once design always loses at-most-once-effects under a crash).
    assert args.design == "lease-outbox" and args.fail_on == "safety"


def test_the_guide_shows_the_same_command_failing_on_lease():
    """The guide shows what the command prints on lease: the same flags, exit 1, the violated property."""
    text = GUIDE.read_text()
    search = next(c for c in guide_commands() if c.startswith("pg-job-chaos "))
    on_lease = search.replace("--design lease-outbox", "--design lease").split(" --junit")[0]
    assert f"$ {on_lease} ..." in text
    shown = text.split(f"$ {on_lease} ...", 1)[1].split("```", 1)[0]
    assert "│ at-most-once-effects │ VIOLATED" in shown and "│ single-commit        │ VIOLATED" in shown
    assert shown.rstrip().endswith("$ echo $?\n1")


def test_ci_run_installs_what_the_tests_need_and_fails_on_failure():
    script = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in script  # any failing step fails CI
    for package in ("chromium", "redis-server", "postgresql-15", "pgbouncer", "docker.io", "nftables"):
        assert f"need+=({package})" in script, package
    assert "apt-get -o DPkg::Lock::Timeout=300 update" in script and "install -y" in script
    lines = script.rstrip().splitlines()
    assert lines[-1] == "pytest"  # the README's test command, last: its closing line is the run's
    assert "pip install -e '.[test,libraries,docs]'" in lines
    build = next(ln for ln in lines if ln.lstrip().startswith("mkdocs build"))
    assert "--strict" in build  # a dead link or anchor in docs/ fails CI
    assert lines.index("pip install -e '.[test,libraries,docs]'") < lines.index(build) < len(lines) - 1
