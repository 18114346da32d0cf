"""A tenant's share of the bodies running (properties/share.py, issue 46): ``tenant-cap`` against a declared
cap and ``work-conserving`` for a lone tenant, on hand-written histories (no database)."""

from __future__ import annotations

from pg_job_chaos import properties
from pg_job_chaos.core.history import History, WorkerExit
from pg_job_chaos.properties import check
from pg_job_chaos.properties.share import idle_limit, lone_stretches
from tests.unit.test_properties import rec

T1 = 10.0


def _execution(worker: str, job: int, attempt: int, start: float, end: float,
               tenant: int | None) -> list[dict]:
    """An execution's lines as a body writes them: its effect the last step before its finish."""
    return [rec(start, worker, "started", job, attempt, tenant=tenant),
            rec(end - 0.01, worker, "effect", job, attempt), rec(end, worker, "finished", job, attempt)]


def _history(runs: list[tuple[str, int, float, float]], tenants: dict[int, int | None], *,
             cap: int | None = None, hosted: bool = False, extra: list[dict] = (),
             exits: list[WorkerExit] | None = None, injected: list[dict] = ()) -> History:
    """Each run is (worker, job, start, end), its tenant from *tenants*; the schedule's poll 0.1 s and lease
    1 s (time scale 1: a worker may go 1.1 s without a body); every worker ended by the harness at
    :data:`T1` unless *exits* says otherwise."""
    attempts: dict[int, int] = {}
    records = list(extra)
    for w, j, a, b in runs:
        attempts[j] = attempts.get(j, 0) + 1
        records += _execution(w, j, attempts[j], a, b, tenants[j])
    sched = {"jobs": [{"id": j, "tenant": t, "duration": 1.0} for j, t in tenants.items()],
             "timing": {"lease": 1.0, "poll": 0.1}, "time_scale": 1.0, "workers": 2}
    workers = sorted({r["worker"] for r in records})
    return History(schedule=sched, design="lease-tenant-cap", tenant_mode="local",
                   records=sorted(records, key=lambda r: r["t"]), jobs=[], runs=[],
                   exits=exits if exits is not None else [WorkerExit(w, 1, T1, "ended", by_harness=True)
                                                          for w in workers],
                   injected=list(injected), t0=0.0, t1=T1, ended_by="quiescent", hosted=hosted,
                   tenant_cap=cap)


def _one(name: str, h: History):
    return check(h, [name])[name]


# --- tenant-cap --------------------------------------------------------------------------------------

def test_a_cap_kept_holds_and_one_exceeded_names_the_tenant_and_the_executions():
    tenants = {1: 1, 2: 1, 3: 1, 4: 2}
    kept = _history([("w1.0", 1, 0.0, 1.0), ("w2.0", 2, 0.0, 1.0), ("w1.0", 3, 1.0, 2.0),
                     ("w3.0", 4, 0.0, 1.0)], tenants, cap=2)
    r = _one("tenant-cap", kept)
    assert r.status == "held" and "no tenant had more than 2" in r.evidence and "the most: 2" in r.evidence
    # cap 1: tenant 1's jobs 1 and 2 overlap from 0.5 s; tenant 2's job beside them is its own
    over = _history([("w1.0", 1, 0.0, 1.0), ("w2.0", 2, 0.5, 1.5), ("w3.0", 4, 0.0, 1.0)], tenants, cap=1)
    r = _one("tenant-cap", over)
    assert (r.status, r.count, r.jobs) == ("violated", 1, (1, 2))
    assert r.evidence == ("tenant 1 had 2 executions running at once 0.50 s into the run, over the cap of 1 "
                          "lease-tenant-cap declares: w1.0 job 1, w2.0 job 2")


def test_no_declared_cap_is_not_judged():
    h = _history([("w1.0", 1, 0.0, 1.0), ("w2.0", 2, 0.0, 1.0)], {1: 1, 2: 1})
    r = _one("tenant-cap", h)
    assert r.status == "unknown" and not r.judged
    assert "declares no per-tenant cap (tenant_cap" in r.evidence


def test_jobs_of_no_tenant_are_capped_as_one_more_tenant():
    h = _history([("w1.0", 1, 0.0, 1.0), ("w2.0", 2, 0.2, 1.0)], {1: None, 2: None}, cap=1)
    r = _one("tenant-cap", h)
    assert r.status == "violated" and r.evidence.startswith("jobs of no tenant had 2 executions")


def test_a_start_between_a_finish_and_its_line_cannot_be_ordered_unless_hosted():
    # w1.0's body sent its effect at 0.99 s and wrote "finished" at 1.0 s; w2.0 started at 0.995 s. A
    # built-in design's finish commits before that line: the start may have come after it. Unknown.
    runs = [("w1.0", 1, 0.0, 1.0), ("w2.0", 2, 0.995, 2.0)]
    r = _one("tenant-cap", _history(runs, {1: 1, 2: 1}, cap=1))
    assert r.status == "unknown" and r.judged
    assert "the log cannot order" in r.evidence and "w1.0 job 1, w2.0 job 2" in r.evidence
    # a hosted library's body writes "finished" before the library's finish frees the slot: an overlap
    r = _one("tenant-cap", _history(runs, {1: 1, 2: 1}, cap=1, hosted=True))
    assert r.status == "violated" and r.jobs == (1, 2)


def test_an_execution_past_its_lease_is_over_the_cap_and_the_evidence_says_why():
    # lease-tenant-cap counts leases: w1.0's job 1 (lease until 0.5 s) overran, w2.0 re-claimed it at 1 s
    late = [{**rec(0.0, "w1.0", "started", 1, 1, tenant=1), "lease_until": 0.5},
            rec(2.99, "w1.0", "effect", 1, 1), rec(3.0, "w1.0", "finished", 1, 1),
            {**rec(1.0, "w2.0", "started", 1, 2, tenant=1), "lease_until": 2.0},
            rec(1.02, "w2.0", "effect", 1, 2), rec(1.5, "w2.0", "finished", 1, 2)]
    r = _one("tenant-cap", _history([], {1: 1}, cap=1, extra=late))
    assert r.status == "violated" and r.jobs == (1,)
    assert "w1.0 job 1 (past its lease), w2.0 job 1" in r.evidence
    assert "a cap on leases held does not stop it" in r.evidence


def test_tenant_cap_is_in_the_table_wherever_a_cap_is_declared():
    capped = properties.applying(replica=False, workload=False, capped=True)
    assert "tenant-cap" in capped and "starvation-bound" not in capped and "work-conserving" not in capped
    assert "tenant-cap" not in properties.applying(replica=False, workload=False)
    h = _history([("w1.0", 1, 0.0, 1.0)], {1: 1}, cap=1)
    assert check(h)["tenant-cap"].status == "held" and "work-conserving" not in check(h)
    assert "tenant-cap" not in check(_history([("w1.0", 1, 0.0, 1.0)], {1: 1}))


# --- work-conserving ---------------------------------------------------------------------------------

def _back_to_back(worker: str, jobs: list[int], start: float = 0.0) -> list[tuple[str, int, float, float]]:
    return [(worker, j, start + k, start + k + 1.0) for k, j in enumerate(jobs)]


def test_two_workers_busy_on_a_lone_tenant_hold():
    tenants = dict.fromkeys(range(1, 9), 1)
    h = _history(_back_to_back("w1.0", [1, 3, 5, 7]) + _back_to_back("w2.0", [2, 4, 6, 8]), tenants)
    assert idle_limit(h) == 1.1 and lone_stretches(h) == [(0.0, 3.0, 1)]
    r = _one("work-conserving", h)
    assert r.status == "held", r.evidence
    assert "6.00 worker-seconds judged" in r.evidence


def test_a_worker_held_back_while_a_lone_tenant_waits_is_violated():
    # w2.0 ran tenant 2's one job, then sat idle while tenant 1 alone had five jobs queued (a cap of 1):
    # 4 s without a body, over a poll and a lease
    tenants = {**dict.fromkeys(range(1, 7), 1), 7: 2}
    h = _history(_back_to_back("w1.0", [1, 2, 3, 4, 5, 6]) + [("w2.0", 7, 0.0, 1.0)], tenants)
    r = _one("work-conserving", h)
    assert (r.status, r.count, r.jobs) == ("violated", 1, (6,))
    assert r.evidence == ("w2.0 ran no body for 4.00 s (from 1.00 s) while tenant 1 alone had jobs queued, "
                          "over a poll and a lease (1.10 s); other workers started 4 of its jobs meanwhile")


def test_a_gap_within_a_poll_and_a_lease_a_dead_worker_and_a_failed_claim_are_not_idling():
    tenants = dict.fromkeys(range(1, 9), 1)
    # w2.0 goes 1.0 s without a body between its jobs, twice: within 1.1 s
    w2 = [("w2.0", 5, 0.0, 1.0), ("w2.0", 6, 2.0, 3.0), ("w2.0", 7, 4.0, 5.0)]
    gaps = _history(_back_to_back("w1.0", [1, 2, 3, 4, 8]) + w2, tenants)
    assert _one("work-conserving", gaps).status == "held"
    # w2.0 died after its first job (exit 1, its last line then): not live, not idle
    crash = [WorkerExit("w1.0", 1, T1, "ended", by_harness=True),
             WorkerExit("w2.0", 2, 1.5, "exit 1", code=1)]
    tenants = {**dict.fromkeys(range(1, 7), 1), 7: 2}
    dead = _history(_back_to_back("w1.0", [1, 2, 3, 4, 5, 6]) + [("w2.0", 7, 0.0, 1.0)], tenants, exits=crash)
    assert _one("work-conserving", dead).status == "held"
    # its claims failed every 0.5 s: it tried
    tries = [rec(1.0 + 0.5 * k, "w2.0", "claim-failed", error="connection lost") for k in range(1, 12)]
    failing = _history(_back_to_back("w1.0", [1, 2, 3, 4, 5, 6]) + [("w2.0", 7, 0.0, 1.0)], tenants,
                       extra=tries)
    assert _one("work-conserving", failing).status == "held"


def test_unknown_when_the_history_cannot_decide():
    # fewer jobs than workers: the lone tenant's one job started at once, nothing waited to be judged
    start = [rec(0.0, "w2.0", "worker-start")]
    r = _one("work-conserving", _history([("w1.0", 1, 0.05, 1.0)], {1: 1}, extra=start))
    assert r.status == "unknown" and r.evidence.startswith("nothing to judge: no stretch of more than 1.10 s")
    # w2.0 never ran a body while tenant 1 alone had jobs queued: starting up or held back
    r = _one("work-conserving", _history(_back_to_back("w1.0", [1, 2, 3, 4, 5, 6]),
                                         dict.fromkeys(range(1, 7), 1), extra=start))
    assert r.status == "unknown" and r.judged
    assert r.evidence.startswith("w2.0 was live from 0.00 s to 5.00 s while tenant 1 alone had jobs queued, "
                                 "and never ran a body: starting up or held back")
    # a supervisor's pause at 0.5 s: nothing after it is judged
    tenants = {**dict.fromkeys(range(1, 7), 1), 7: 2}
    paused = _history(_back_to_back("w1.0", [1, 2, 3, 4, 5, 6]) + [("w2.0", 7, 0.0, 1.0)], tenants,
                      injected=[{"t": 0.5, "fault": "pause", "worker": "w2.0"}])
    r = _one("work-conserving", paused)
    assert r.status == "unknown" and "before the supervisor's first fault (pause)" in r.evidence


def test_a_hosted_library_is_not_judged():
    h = _history(_back_to_back("w1.0", [1, 2, 3]), dict.fromkeys(range(1, 4), 1), hosted=True)
    r = _one("work-conserving", h)
    assert r.status == "unknown" and not r.judged and "polls on its own interval" in r.evidence


# --- the declaration ---------------------------------------------------------------------------------

def test_the_designs_that_promise_a_cap_declare_it_and_a_bad_one_is_a_usage_error():
    import pytest

    from pg_job_chaos.core.errors import UsageError
    from pg_job_chaos.workers.design import DesignHandle
    from pg_job_chaos.workers.hosted import HostedDesign
    from pg_job_chaos.workers.loading import load_design

    assert load_design("lease-tenant-cap", {"cap": "2"}).tenant_cap == 2
    assert load_design("lease").tenant_cap is None and load_design("lease-round-robin").tenant_cap is None
    # each library's per-tenant switch that serialises a tenant across all workers (issue 38's options;
    # pg-boss's and graphile-worker's declare theirs too, but their Node client describes itself at load)
    for design, option in (("dbos", "per-tenant-partition"), ("pgqueuer", "per-tenant-entrypoint"),
                           ("procrastinate", "per-tenant-lock")):
        assert load_design(design, {"fairness": option}).tenant_cap == 1, design
        assert load_design(design).tenant_cap is None, design
    # a limit per worker process is no cap across the workers: not declared
    for design, option in (("oban", "per-tenant-queue"), ("chancy", "per-tenant-queue"),
                           ("awa", "per-tenant-partition")):
        assert load_design(design, {"fairness": option}).tenant_cap is None, design
    for bad in (0, 2.5, "1", True):
        with pytest.raises(UsageError, match="tenant_cap"):
            DesignHandle.of(type("Mine", (HostedDesign,), {"tenant_cap": bad})(), "mine")
