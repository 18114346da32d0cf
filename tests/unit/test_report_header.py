"""The verdict's header names what set each job's tenant: the tenant mode, or the design's own tenant
code with its options (``--design-option scope=session`` prints as session, never as ``(local)``)."""

from __future__ import annotations

from pg_job_chaos.core.schedule import Schedule
from pg_job_chaos.harness.engine.outcome import Run, SearchOutcome
from pg_job_chaos.harness.report import build
from pg_job_chaos.properties import check
from tests.unit.test_properties import sane, schedule
from tests.unit.test_tenant_reads import own


def _schedule(options) -> Schedule:
    return Schedule.from_dict(schedule()).replace(design="tenant-worker", design_options=options)


def _search(h, options, tmp_path):
    s = _schedule(options)
    out = SearchOutcome(runs=[Run(s, check(h), h, 0.1)], seconds=0.1)
    return build.search_report(out, faults=[], design="tenant-worker", tenant_mode="local", examples=1,
                               seed=1, server={}, stamp=lambda x: x, out_dir=tmp_path)


def test_own_tenant_code_with_session_scope_prints_as_session_not_the_unused_tenant_mode(tmp_path):
    h = sane(records=[*own("w1.0", 1, 1, 1.0, 2.0, tenant=1, seen="1"),
                      *own("w1.0", 2, 1, 2.0, 3.0, tenant=1, seen="1")])
    title = _search(h, {"scope": "session"}, tmp_path).title
    assert title.startswith("tenant-worker scope=session (own tenant code) under faults none: 1 runs"), title
    assert "(local)" not in title
    replay = build.replay_report(h, check(h), _schedule({"scope": "session"}), "s.json")
    assert replay.title == "replay of s.json on tenant-worker scope=session (own tenant code)"


def test_the_harness_pools_tenant_mode_is_named_as_before(tmp_path):
    title = _search(sane(), {}, tmp_path).title
    assert title.startswith("tenant-worker (local) under faults none"), title
