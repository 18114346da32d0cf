"""The real-bug corpus (issue 48) without a database: the case format and its errors, the docs' example as a
user's own folder, the repository's cases, the search's replay count, and the versions' refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pg_job_chaos.core.errors import EXIT_HELD, EXIT_USAGE, UsageError
from pg_job_chaos.core.history import History
from pg_job_chaos.core.schedule import Schedule
from pg_job_chaos.harness.cli.main import main
from pg_job_chaos.harness.corpus import CORPUS, case, envs, systems
from pg_job_chaos.harness.engine.search import search
from pg_job_chaos.workers import DesignHandle, load_design

ROOT = Path(__file__).resolve().parents[2]
GOOD = """system = "awa"
buggy = "0.6.9"
link = "https://example.org/issue/1"
summary = "s"
property = "bounded-attempts"
budget = 60
[search]
faults = ["crash"]
"""


def _docs_example() -> str:
    """The TOML block of docs/reference/corpus.md: what a user copies."""
    text = (ROOT / "docs" / "reference" / "corpus.md").read_text()
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    return block


def test_a_users_own_folder_with_the_docs_example_is_listed(tmp_path, capsys):
    (tmp_path / "awa-rescue.toml").write_text(_docs_example())
    assert main(["corpus", "--cases", str(tmp_path), "--list"]) == EXIT_HELD
    out = capsys.readouterr().out
    assert out.startswith("awa-rescue: awa 0.6.9 -> none; bounded-attempts, 300 s;"), out
    c = case.load(tmp_path / "awa-rescue.toml")
    assert (c.fixed, c.design, c.search_flags()) == (None, "awa", ["--faults", "crash"])


def test_every_case_of_the_corpus_loads_and_names_where_it_was_checked():
    cases = case.load_dir(CORPUS)
    assert cases
    for c in cases:
        assert c.blocked or c.verified, f"{c.file}: a runnable case says where the bug is (verified)"


@pytest.mark.parametrize("field", ["budget", "nonsense", "seed", "search.point", "search.faults", "property",
                                   "system"])
def test_a_wrong_field_is_a_usage_error_naming_it(tmp_path, capsys, field):
    text = {
        "budget": GOOD.replace("budget = 60", "budget = -1"),
        "nonsense": "nonsense = 1\n" + GOOD,
        "seed": "seed = 3\n" + GOOD,
        "search.point": GOOD + 'point = "mid-work"\n',
        "search.faults": GOOD.replace('["crash"]', '["crush"]'),
        "property": GOOD.replace("bounded-attempts", "bounded"),
        "system": GOOD.replace('"awa"', '"sidekiq"'),
    }[field]
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(UsageError, match=rf"case .*bad.toml: {re.escape(field)}"):
        case.load(tmp_path / "bad.toml")
    assert main(["corpus", "--cases", str(tmp_path), "--list"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f": {field}" in err and "Traceback" not in err, err


def test_a_deploys_grace_is_a_search_flag_and_only_with_deploy(tmp_path):
    deploy = GOOD.replace('["crash"]', '["deploy"]')
    (tmp_path / "g.toml").write_text(deploy + "grace = 0.01\n")
    assert case.load(tmp_path / "g.toml").search_flags() == ["--faults", "deploy", "--grace", "0.01"]
    for text, why in ((GOOD + "grace = 0.01\n", "faults include deploy"),
                      (deploy + "grace = -1\n", "0 or more")):
        (tmp_path / "g.toml").write_text(text)
        with pytest.raises(UsageError, match=rf"search.grace: .*{why}"):
            case.load(tmp_path / "g.toml")


def test_a_missing_field_and_an_unknown_case_name_are_usage_errors(tmp_path, capsys):
    (tmp_path / "short.toml").write_text('system = "awa"\n')
    with pytest.raises(UsageError, match="missing buggy, link, summary, property, budget"):
        case.load(tmp_path / "short.toml")
    (tmp_path / "short.toml").write_text(GOOD)
    assert main(["corpus", "--cases", str(tmp_path), "nope"]) == EXIT_USAGE
    assert "no case 'nope'" in capsys.readouterr().err


def _history(schedule: Schedule) -> History:
    """Every job still queued at the end: terminal-states violated."""
    return History(schedule=schedule.to_dict(), design=schedule.design, tenant_mode=schedule.tenant_mode,
                   records=[], jobs=[{"id": j.id, "status": "queued", "attempts": 0, "max_attempts": 3}
                                     for j in schedule.jobs], runs=[],
                   exits=[], injected=[], samples=[], ended_by="stalled", t0=0.0, t1=1.0, notes=[], server={})


def _done(schedule: Schedule) -> History:
    h = _history(schedule)
    h.jobs = [{**j, "status": "done"} for j in h.jobs]
    return h


def test_the_search_replays_its_counterexample_as_many_times_as_asked_and_counts_them(monkeypatch):
    """Every search run violates terminal-states; of its four replays, the second and fourth do not: 2 of 4
    reproduce, and the search says flaky. One replay that reproduces is not flaky."""
    handle = load_design("lease")
    kw = dict(faults=(), design=handle, tenant_mode="local", examples=2, seed=1, time_scale=0.2,
              database=None, gate=("terminal-states",), stop_at_first=True)
    calls: list[str] = []
    replaying = {"on": False, "k": 0}

    def run(s: Schedule, *, design: DesignHandle) -> History:
        calls.append(s.to_json())
        if replaying["on"]:
            replaying["k"] += 1
            return _history(s) if replaying["k"] % 2 else _done(s)
        return _history(s)

    from pg_job_chaos.harness.engine import search as engine

    original = engine.Search._replay

    def replay(self, ce):
        replaying["on"] = True
        original(self, ce)

    monkeypatch.setattr(engine.Search, "_replay", replay)  # from the replay phase on, every other run holds
    out = search(run, replays=4, **kw)
    monkeypatch.undo()
    assert (len(out.replays), out.reproduced, out.flaky) == (4, 2, True)
    assert out.first_failure_runs == 1
    once = search(lambda s, *, design: _history(s), replays=1, **kw)
    assert (len(once.replays), once.reproduced, once.flaky) == (1, 1, False)


def test_the_pinned_version_needs_no_environment_and_a_node_floor_is_refused():
    pinned = envs.locate(systems.SYSTEMS["awa"], envs._pinned_version(systems.SYSTEMS["awa"]) or "?")
    assert pinned is not None and pinned.pinned
    node = systems.node_major()
    why = systems.refusal(systems.SYSTEMS["pg-boss"], "11.0.0")
    if node is not None and node < 22:
        assert why == f"pg-boss 11.0.0 needs Node >= 22 (its package.json engines); this node is {node}"
    assert systems.refusal(systems.SYSTEMS["pg-boss"], "10.4.2") is None or node is None


def test_the_report_says_how_many_replays_reproduced():
    from pg_job_chaos.harness.report import text
    from pg_job_chaos.harness.report.result import Report

    def state(replays: int, reproduced: int) -> str:
        r = Report("search", "t", {}, replays=replays, reproduced=reproduced, flaky=reproduced < replays)
        return text.replay_state(r)

    assert state(1, 1) == "replayed: violated again"
    assert state(1, 0) == "FLAKY: the replay did not violate it again"
    assert state(10, 10) == "replayed 10 times: violated again in 10 of 10"
    assert state(10, 7) == "FLAKY: replayed 10 times, violated again in 7 of 10"
