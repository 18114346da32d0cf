"""What a history shows a design declared wrong (issue 46, ``core/misdeclared.py``), on hand-written
histories and hand-made designs -- no database: the tenant setting its own code sets, a declared lease
asked where the harness asks for it, and a finish dated before its body's last statement. Each check
holds on an empty history and a sane one, and fails naming the fix on the mistake."""

from __future__ import annotations

from pg_job_chaos.core import misdeclared
from pg_job_chaos.core.events import LogEvent
from pg_job_chaos.core.schedule import JobSpec, Schedule, Timing
from pg_job_chaos.core.setting_sql import settings_named
from pg_job_chaos.workers import Clock, DesignHandle
from pg_job_chaos.workers.hosted import HostedDesign
from tests.unit.test_properties import at, history, rec, run_row, sane

DECLARED = "app.tenant"  # the default a design that declares none gets


def own(*sets: str, declared: str = DECLARED, own_tenant: bool = True):
    """Two executions on the worker's own connection (``own_tenant``), its code setting *sets*."""
    records = [rec(1.0, "w1.0", "started", 1, 1, tenant=1, own_tenant=own_tenant),
               rec(2.0, "w1.0", "finished", 1, 1)]
    records += [rec(0.9, "w1.0", LogEvent.SETTING_SET, setting=s, declared=declared, job=None,
                    statement=f"select set_config('{s}', %s, true)") for s in sets]
    return history(records=records)


def finished(*finishes: dict, runs=None):
    """A hosted run whose queue recorded *finishes* for job 1, beside job_runs rows *runs* (default: job
    1's attempt 1, its body's last statement at 2.0 s)."""
    h = sane(runs=list(runs) if runs is not None else [run_row(1, 1, finished=2.0)])
    h.hosted = True
    h.finishes = [{"job": 1, "recorded": "done", "complete": True, "finishes": list(finishes)}]
    return h


def success(t: float, *, clock: str = "database", attempt: int | None = None) -> dict:
    return {"outcome": "success", "what": "done", "at": at(t), "t": t, "attempt": attempt, "clock": clock}


def test_every_check_holds_on_an_empty_and_a_sane_history():
    for h in (history(), sane()):
        assert [(f.check, f.held) for f in misdeclared.findings(h)] == [
            (name, True) for name in misdeclared.CHECKS]
        assert misdeclared.CHECKS == ("setting", "lease", "finish-time")
        assert misdeclared.warnings([h]) == []


# --- setting ------------------------------------------------------------------------------------------

def test_tenant_code_that_sets_another_setting_than_the_declared_one_is_named_with_the_fix():
    f = misdeclared.setting(own("app.current_tenant"))
    assert not f.held
    assert "sets app.current_tenant (`select set_config('app.current_tenant', %s, true)`), never app.tenant" \
        in f.evidence
    assert f.fix.startswith("declare tenant_setting = 'app.current_tenant' on the design class")
    assert f.warning().startswith("WARNING: setting: the worker's own code sets app.current_tenant")
    several = misdeclared.setting(own("app.user_id", "app.current_tenant"))
    assert not several.held and "'app.user_id' or 'app.current_tenant'" in several.fix


def test_the_declared_setting_set_or_nothing_set_or_the_harness_setting_the_tenant_holds():
    declared = misdeclared.setting(own("app.current_tenant", "app.user_id", declared="app.current_tenant"))
    assert declared.held and declared.evidence == "it sets app.current_tenant, as declared (also app.user_id)"
    assert misdeclared.setting(own()).held  # set by a function of its own: not seen, not a mistake seen
    # the body on the harness's pool (no conn=): the run's tenant mode sets app.tenant, whatever else is set
    assert misdeclared.setting(own("app.request_id", own_tenant=False)).held


def test_the_setting_names_a_statement_spells():
    assert settings_named("select set_config('app.current_tenant', %s, true)") == ("app.current_tenant",)
    assert settings_named("SET LOCAL app.x = 1") == ("app.x",)
    assert settings_named('set "app.q" to 2; select 1') == ("app.q",)
    assert settings_named("select set_config('App.T'::text, '1', false), set_config('app.u', '2', true)") \
        == ("app.t", "app.u")
    # not a custom setting, a name not spelled, no SET at all
    for text in ("update jobs set status = 'done'", "select set_config('search_path', 'x', false)",
                 "select set_config(%s, %s, true)", "reset app.tenant", "set statement_timeout = 5"):
        assert settings_named(text) == (), text


# --- lease --------------------------------------------------------------------------------------------

def test_a_declared_lease_that_gives_none_where_the_harness_asks_is_named_with_the_fix():
    h = sane()
    h.clock = Clock(None, "declared", "q's lease_seconds returned None where the harness asks for it")
    f = misdeclared.lease(h)
    assert not f.held and f.evidence.endswith("horizon is not judged")
    assert "self.lease is the schedule's lease on the run's view" in f.fix
    assert "leave lease_seconds out if the queue never takes a job back" in f.fix
    for clock in (Clock(0.5, "declared", "q's own lease"), Clock(None, None, "q has no lease"), None):
        h.clock = clock
        assert misdeclared.lease(h).held, clock


class _Guided(HostedDesign):
    """The guide's advice: ``self.lease``, set on the run's view only."""

    name = "q"

    def lease_seconds(self, schedule):
        return self.lease


class _WorkerOnly(_Guided):
    """A lease known in the forked worker only (set in ``run_worker``): None where the harness asks."""

    visibility: float | None = None

    def lease_seconds(self, schedule):
        return self.visibility


def test_the_harness_asks_the_lease_of_the_runs_view_where_self_lease_is_known():
    s = Schedule(jobs=(JobSpec(1),), time_scale=0.5, timing=Timing(lease=2.0))
    handle = DesignHandle.of(_Guided())
    assert handle.design.lease_seconds(s) is None  # the design itself: no run's lease (issue 46)
    assert handle.for_run(s).clock() == Clock(1.0, "declared", "q's own lease (its lease_seconds)")
    assert handle.clock(s) == Clock(1.0, "declared", "q's own lease (its lease_seconds)")
    none = DesignHandle.of(_WorkerOnly()).for_run(s).clock()
    assert (none.seconds, none.basis) == (None, "declared")
    assert none.what == ("q's lease_seconds returned None where the harness asks for it (the run's view, "
                         "after for_run)")


# --- finish-time --------------------------------------------------------------------------------------

def test_a_success_dated_before_its_bodys_last_statement_is_named_with_the_fix():
    f = misdeclared.finish_time(finished(success(1.4)))  # now(): the transaction began before the body
    assert not f.held
    assert f.evidence.startswith("job 1's success (done) is dated 05:00:01.400000, 600 ms before its body's "
                                 "last statement (05:00:02, the job_runs row's clock_timestamp())")
    assert f.fix.startswith("date the finish with clock_timestamp()")
    # the attempt it names: attempt 2's body ended at 3.0, attempt 1's at 2.0
    named = finished(success(2.5, attempt=2), runs=(run_row(1, 1, finished=2.0), run_row(1, 2, finished=3.0)))
    assert not misdeclared.finish_time(named).held


def test_a_success_dated_after_its_body_or_not_comparable_holds():
    assert misdeclared.finish_time(finished(success(2.01))).held  # clock_timestamp() after the insert
    assert misdeclared.finish_time(finished(success(1.9995))).held  # within DATE_SLACK: a ms-truncated date
    assert misdeclared.finish_time(finished(success(1.4, clock="worker"))).held  # another clock
    assert misdeclared.finish_time(finished(success(1.4), runs=())).held  # no committed body to set beside
    # undated, a failure, a history saved before finishes said their clock
    undated = {**success(1.4), "at": None}
    failure = {**success(1.4), "outcome": "failure"}
    old = {k: v for k, v in success(1.4).items() if k != "clock"}
    for f in (undated, failure, old):
        assert misdeclared.finish_time(finished(f)).held, f
    # an earlier committed body: a now() after it is not told from a real date (the docstring says so)
    assert misdeclared.finish_time(finished(success(2.5), runs=(run_row(1, 1, finished=2.0),
                                                                 run_row(1, 2, finished=3.0)))).held


def test_warnings_say_each_mistake_once_over_many_runs():
    h = finished(success(1.4))
    h.clock = Clock(None, "declared", "q's lease_seconds returned None")
    lines = misdeclared.warnings([h, h, sane()])
    assert [line.split(":")[1].strip() for line in lines] == ["lease", "finish-time"]
