"""The article's experiments in their --quick form: qualitative results only, never absolute times."""

from __future__ import annotations

import json

import pytest

from pg_job_chaos.harness.cli.main import main
from pg_job_chaos.harness.experiments import NAMES, render, run_experiment

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def run(database):
    """Run an experiment --quick once per module; results are cached by name."""
    cache: dict[str, dict] = {}

    def go(name: str, **kwargs) -> dict:
        if name not in cache:
            result = run_experiment(name, database, quick=True, progress=lambda _m: None, **kwargs)
            json.dumps(result)  # JSON-serialisable, as --json writes it
            assert result["experiment"] == name and result["rows"] and result["article"]
            assert "article" in render(result).splitlines()[1]
            cache[name] = result
        return cache[name]

    return go


def _by(rows, *keys):
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


def test_leak_success_leaks_failure_does_not_autocommit_both_local_none(run):
    rows = _by(run("leak")["rows"], "tenant_mode", "tenant2_fails")
    assert rows[("session", False)]["counts_after"] == [20000, 10000, 6666]
    assert rows[("session", True)]["counts_after"] == [20000, 20000, 6666]  # tenant 1 still set
    assert rows[("session-autocommit", False)]["counts_after"] == [20000, 10000, 6666]
    assert rows[("session-autocommit", True)]["counts_after"] == [20000, 10000, 6666]
    assert rows[("local", False)]["counts_after"] == [0, 0, 0]
    assert rows[("local", True)]["counts_after"] == [0, 0, 0]


def test_reset_cost_traps(run):
    rows = _by(run("reset-cost")["rows"], "variant")
    assert rows["discard-all"]["failed_at_job"] == [7, 7]
    assert '"_pg3_0" does not exist' in rows["discard-all"]["error"]
    assert rows["discard-all-unprepared"]["errors"] == [0, 0]
    slow = rows["reset-no-autocommit"]
    # A new connection per job (a job may time out waiting for one on a loaded machine: not the point).
    assert all(c >= slow["jobs"] - e
               for c, e in zip(slow["connections_opened"], slow["errors"], strict=True)), slow
    for variant in ("session", "local", "reset", "discard-all-unprepared"):
        assert rows[variant]["connections_opened"] == [1, 1]
    # Discarding a connection per job costs more than any variant that keeps it (no absolute times).
    assert min(slow["median_ms"]) > max(rows["reset"]["median_ms"])


def test_poison_never_counted_without_handler(run):
    rows = _by(run("poison")["rows"], "design")
    naive, handler = rows["one-transaction"], rows["one-transaction-handler"]
    assert naive["picked"] == "10 of 10" and naive["attempts_counted"] == 0 and naive["job_runs_rows"] == 0
    assert naive["healthy_job"] == "queued" and not naive["healthy_ran"]
    assert handler["poison_state"] == "dead" and handler["attempts_counted"] == 3
    assert handler["healthy_job"] == "done"


def test_crash_kills_every_worker_without_lease_and_the_sweep_ends_it(run):
    rows = _by(run("crash")["rows"], "design")
    one = rows["one-transaction"]
    assert one["workers_killed"] == one["executions"] >= 3 and one["attempts"] == 0
    assert one["final_state"] == "queued" and one["healthy_job"] == "queued"
    lease = rows["lease"]
    assert lease["workers_killed"] == 3 and lease["attempts"] == 3
    assert lease["final_state"] == "running" and lease["lease_expired"] and lease["healthy_job"] == "done"
    assert rows["lease, then the sweep"]["final_state"] == "dead"


def test_overrun_fence_keeps_one_run_heartbeat_one_execution(run):
    rows = _by(run("overrun")["rows"], "design")
    assert rows["lease"]["executions"] == 2 and rows["lease"]["committed_runs"] == 2
    fenced = rows["lease-fenced"]
    assert fenced["executions"] == 2 and fenced["committed_runs"] == 1 and fenced["side_effects"] == 2
    hb = rows["lease-heartbeat"]
    assert hb["executions"] == 1 and hb["committed_runs"] == 1 and hb["side_effects"] == 1


def test_vacuum_held_back_only_by_a_transaction_that_wrote(run):
    rows = _by(run("vacuum")["rows"], "way")
    # A ratio, not zero: a transaction of someone else's that happens to be open when VACUUM runs
    # (autovacuum's own ANALYZE takes a snapshot) can keep a handful of versions; a held horizon
    # keeps about one per short job.
    for way in ("one-transaction (FOR UPDATE)", "long transaction that wrote"):
        assert rows[way]["not_yet_removable"] >= rows[way]["short_jobs"] / 2 and \
            rows[way]["long_job_open_at_vacuum"]
    for way in ("nothing held", "lease, work outside a transaction", "READ COMMITTED, only read"):
        assert rows[way]["not_yet_removable"] <= rows[way]["short_jobs"] / 20
    assert all(r["long_job_error"] is None for r in rows.values())


def test_horizon_held_grows_free_does_not(run, tmp_path):
    result = run("horizon", plot_dir=tmp_path)
    series = {s["variant"]: s["block_median_ms"] for s in result["series"]}
    assert set(series) >= {"none", "held-xid", "done-partial-index", "repeatable-read"}

    def growth(xs):  # last two blocks against the first two: robust to one noisy block
        return (xs[-1] + xs[-2]) / (xs[0] + xs[1])

    assert growth(series["held-xid"]) > 2 * growth(series["none"])  # measured: 7x against 1.1x
    assert growth(series["repeatable-read"]) > growth(series["none"])
    held, free = result["explain"]["held"], result["explain"]["free"]
    assert held["shared_buffers"] > free["shared_buffers"]
    assert result["after_release_ms"]["held-xid"] < series["held-xid"][-1]
    timeout = next(s for s in result["series"] if s["variant"] == "idle-timeout")
    assert False in timeout["holder_alive_per_block"]  # the server ended the idle holder
    assert (tmp_path / "horizon.png").stat().st_size > 0


def test_rls_queue_looks_empty_without_error(run):
    rows = run("rls-queue")["rows"]
    policy = next(r for r in rows if r["policy_on_jobs"] and r["tenant_context"] == "none")
    assert policy["jobs_visible"] == "0 of 100" and policy["claim_returned"] == "nothing"
    assert policy["error"] == "none"
    assert next(r for r in rows if not r["policy_on_jobs"])["jobs_visible"] == "100 of 100"


def test_names_and_cli_errors(capsys):
    assert NAMES == ("leak", "reset-cost", "poison", "crash", "overrun", "vacuum", "horizon", "rls-queue",
                     "failover", "noisy-neighbour")
    assert main(["experiment", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rls-queue" in err[0]
    assert main(["experiment", "leak", "--postgres", "bogus"]) == 2  # a UsageError from provision


def test_main_writes_json_and_plots(tmp_path, capsys):
    import matplotlib.image

    out = tmp_path / "r.json"
    assert main(["experiment", "reset-cost", "--quick", "-q",
                 "--json", str(out), "--plot", str(tmp_path)]) == 0
    data = json.loads(out.read_text())
    assert data["experiment"] == "reset-cost" and data["rows"]
    assert "article" in capsys.readouterr().out
    assert data["plots"] and sorted(data["plots"]) == sorted(str(p) for p in tmp_path.glob("*.png"))
    for png in data["plots"]:
        image = matplotlib.image.imread(png)  # a real PNG, or this raises
        assert image.shape[0] > 100 and image.shape[1] > 100, png
        assert len({tuple(px) for px in image.reshape(-1, image.shape[-1])[::97]}) > 2, f"{png} is blank"
