"""graphile-worker's version range (adapters/graphile.py, "Versions"), without a database: a version before
0.16 is hosted by the pre-0.16 variant (its job rows in the ``jobs`` table itself), 0.16 and later by the
``_private_jobs`` one -- on the Python side (:func:`legacy`, the recovery statement's digest) and on the Node
side (the descriptor's SQL), each reading the version the client finds (``PGJC_NODE_MODULES``). The Node
side is run against a stand-in package that has only a version and the names the client imports."""

from __future__ import annotations

import json

import pytest

from pg_job_chaos.adapters.graphile import RECOVERY, legacy
from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.workers import load_design
from tests.hosted_runs import node_missing


@pytest.mark.parametrize("version, old", [
    ("0.13.0", True), ("0.14.0-rc.0", True), ("0.15.0", True), ("0.15.1", True), ("0.15.2-bridge.0", True),
    ("0.16.0-rc.0", False), ("0.16.0", False), ("0.16.6", False), ("0.17.3", False), ("0.18.0", False),
    ("1.0.0", False), ("v0.15.1", True),
])
def test_a_version_before_0_16_is_the_legacy_variant(version, old):
    assert legacy(version) is old


@pytest.mark.parametrize("version", ["", "unknown", "15"])
def test_a_version_without_major_minor_is_refused(version):
    with pytest.raises(ValueError, match="no major.minor"):
        legacy(version)


def _stand_in(tmp_path, version: str):
    """A node_modules holding a graphile-worker that is only its version and the names the client imports."""
    pkg = tmp_path / version / "node_modules" / "graphile-worker"
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "graphile-worker", "version": version,
                                                  "main": "index.js"}))
    (pkg / "index.js").write_text(
        "class Logger { constructor(f) { this.f = f; } }\n"
        "const no = () => { throw new Error('stand-in: not for work'); };\n"
        "module.exports = { Logger, makeWorkerUtils: no, run: no, runMigrations: no };\n")
    return pkg.parent


@pytest.mark.skipif(node_missing() is not None, reason=str(node_missing()))
@pytest.mark.parametrize("version, jobs, queues", [
    ("0.14.0-rc.0", "jobs", "job_queues"), ("0.15.1", "jobs", "job_queues"),
    ("0.16.6", "_private_jobs", "_private_job_queues"), ("0.17.3", "_private_jobs", "_private_job_queues"),
])
def test_the_client_and_the_design_choose_the_variant_of_the_version_found(tmp_path, monkeypatch, version,
                                                                           jobs, queues):
    monkeypatch.setenv("PGJC_NODE_MODULES", str(_stand_in(tmp_path, version)))
    handle = load_design("graphile-worker")
    d = handle.design
    assert d.version == version and d.legacy is legacy(version)
    assert handle.recovery_statements == RECOVERY[legacy(version)]
    sql = d.descriptor["sql"]
    assert sql["reset"] == f"truncate graphile_worker.{jobs}, graphile_worker.{queues}, pgjc_graphile_deleted"
    # the reads go through graphile_worker.jobs in both: the table before 0.16, its public view since
    for name in ("pending", "final_states", "accepted_finishes"):
        assert "graphile_worker.jobs " in sql[name] and "_private" not in sql[name], name
        assert "{" not in sql[name], name  # every placeholder filled


@pytest.mark.skipif(node_missing() is not None, reason=str(node_missing()))
def test_a_client_that_describes_no_version_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PGJC_NODE_MODULES", str(_stand_in(tmp_path, "nightly")))
    with pytest.raises(UsageError, match="graphile-worker version 'nightly'"):
        load_design("graphile-worker")
