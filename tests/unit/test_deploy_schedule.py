"""The deploy fault's data (issue 47), no database: schedule format 4 (``timing.grace``, the deploy's
variants) round-trips, formats 1 to 3 still load and mean what they meant, the strategies draw every
variant, the fault's steps per variant, and ``--grace``'s usage error."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.events import FaultStep
from pg_job_chaos.core.schedule import DEFAULT_GRACE, FORMAT, Event, JobSpec, Schedule, Timing, load
from pg_job_chaos.faults import check_schedule, parse_faults
from pg_job_chaos.faults.api import Stop
from pg_job_chaos.faults.catalogue import CATALOGUE
from pg_job_chaos.faults.supervisor import DEPLOY_VARIANTS
from pg_job_chaos.properties.strategies import schedules
from tests.conftest import ROOT, run_cli
from tests.unit.test_fault_needs import FakeAPI

SAVED = sorted((ROOT / "docs").rglob("*.json"))


def _saved_schedules() -> list[Path]:
    """The saved schedule files under docs/ (a schedule: a top-level object with jobs and a format)."""
    out = []
    for p in SAVED:
        try:
            data = json.loads(p.read_text())
        except ValueError:
            continue
        if isinstance(data, dict) and "jobs" in data and isinstance(data.get("format"), int):
            out.append(p)
    return out


def test_format_4_round_trips_a_deploy_and_its_grace():
    assert FORMAT == 4
    s = Schedule(jobs=(JobSpec(1, duration=2.0),), workers=2, timing=Timing(grace=0.5),
                 events=(Event("deploy", 1, point="after-insert", variant="same-identity-all"),))
    data = s.to_dict()
    assert data["format"] == 4 and data["timing"]["grace"] == 0.5
    again = Schedule.from_dict(json.loads(s.to_json()), validators=[check_schedule])
    assert again == s and again.grace == 0.5
    assert Event("deploy", 1).variant == "rolling"  # the first variant: the default
    assert Schedule(jobs=(JobSpec(1),)).grace == DEFAULT_GRACE == 30.0  # Kubernetes' default
    assert Schedule(jobs=(JobSpec(1),), time_scale=0.2).seconds(DEFAULT_GRACE) == pytest.approx(6.0)


def test_saved_schedules_of_formats_1_to_3_load_and_replay_as_they_were_written():
    # the ones written before format 4 (the docs now hold format-4 ones too: the deploy rows' schedules)
    saved = [p for p in _saved_schedules() if json.loads(p.read_text())["format"] <= 3]
    formats = {json.loads(p.read_text())["format"] for p in saved}
    assert len(saved) >= 10 and 3 in formats, formats
    for p in saved:
        s = load(p, validators=[check_schedule])
        assert s.timing.grace is None and s.grace == DEFAULT_GRACE  # no deploy then: the default
        data = s.to_dict()
        assert data["format"] == 4
        old = json.loads(p.read_text())
        # every field it had reads back as written (the new field is the only addition)
        defaults = {k: v for k, v in dataclasses.asdict(Timing()).items() if k != "grace"}
        written = {**defaults, **(old.get("timing") or {})}
        assert {k: v for k, v in data["timing"].items() if k != "grace"} == written
        assert [e["fault"] for e in data["events"]] == [e["fault"] for e in old.get("events", [])]
        assert Schedule.from_dict(json.loads(s.to_json()), validators=[check_schedule]) == s


def test_a_format_3_schedule_by_hand_loads_and_a_newer_format_is_refused():
    old = {"format": 3, "jobs": [{"id": 1}], "events": [{"fault": "horizon", "job": 1, "variant": "xid"}],
           "timing": {"lease": 1.0}}
    s = Schedule.from_dict(old, validators=[check_schedule])
    assert s.timing == Timing() and s.events[0].variant == "xid"
    with pytest.raises(UsageError, match="reads formats 1 to 4"):
        Schedule.from_dict({**old, "format": 5})


def test_a_deploy_takes_only_its_own_variants():
    data = {"jobs": [{"id": 1}], "events": [{"fault": "deploy", "job": 1, "variant": "xid"}]}
    with pytest.raises(UsageError, match="deploy takes 'rolling', 'same-identity', 'drain'"):
        Schedule.from_dict(data, validators=[check_schedule])
    # the faults drawn at a position still take the drawn names (formats 1-3)
    Schedule.from_dict({"jobs": [{"id": 1}], "events": [{"fault": "failover", "job": 1, "variant": "xid"}]},
                       validators=[check_schedule])


@settings(max_examples=60, deadline=None, database=None)
@given(st.data())
def test_the_strategies_draw_deploy_events_with_deploy_variants(data):
    s = data.draw(schedules(faults=parse_faults("deploy"), design="lease"))
    assert all(e.variant in DEPLOY_VARIANTS for e in s.events)


def test_every_deploy_variant_is_drawn():
    seen = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(schedules(faults=parse_faults("deploy"), design="lease"))
    def draw(s):
        seen.update(e.variant for e in s.events)

    draw()
    assert seen == set(DEPLOY_VARIANTS)


@pytest.mark.parametrize("variant", DEPLOY_VARIANTS)
def test_the_deploy_steps_per_variant(variant):
    sup = FakeAPI()
    CATALOGUE["deploy"].inject(sup, Event("deploy", 7, variant=variant), Stop("w1.0", 1, 7, 7, 1, "mid-work"))
    everyone = variant.endswith("-all")
    terms = [c[1] for c in sup.calls if c[0] == "sigterm"]
    assert terms == (["w1.0", "w2.0"] if everyone else ["w1.0"])
    # every SIGTERM before any replacement; a drain's replacement only after the old one has gone
    replaced_now = [c for c in sup.calls if c[0] == "replacement"]
    if variant.startswith("drain"):
        assert not replaced_now
    else:
        assert [c[2] for c in replaced_now] == [variant.startswith("same-identity")] * len(terms)
    # the worker goes on from the point once every SIGTERM is sent, before any fork: its job finishes
    go = sup.calls.index(("go",))
    assert max(i for i, c in enumerate(sup.calls) if c[0] == "sigterm") < go
    assert all(i > go for i, c in enumerate(sup.calls) if c[0] == "replacement")
    sup.run_later()
    steps = [c[1] for c in sup.calls if c[0] == "record"]
    assert steps.count(FaultStep.DEPLOY) == steps.count(FaultStep.REPLACEMENT_STARTED) == len(terms)
    assert steps.count(FaultStep.GRACE_KILL) == len(terms)  # FakeAPI: still there when the grace ends
    assert ("signal", 9) not in sup.calls  # the grace's SIGKILL goes through kill_after_grace


class _Terminating(FakeAPI):
    """FakeAPI whose live workers are those no deploy has signalled yet, as the supervisor's are."""

    def live_workers(self):
        gone = {c[1] for c in self.calls if c[0] == "sigterm"}
        return tuple(w for w in ("w1.0", "w2.0") if w not in gone)


@pytest.mark.parametrize("variant", DEPLOY_VARIANTS)
def test_a_second_deploy_of_a_terminating_worker_sends_no_second_sigterm(variant):
    # a second SIGTERM is what django-tasks-db's db_worker takes as "force": it ends the task in hand
    sup = _Terminating()
    deploy = CATALOGUE["deploy"]
    deploy.inject(sup, Event("deploy", 7, variant=variant), Stop("w1.0", 1, 7, 7, 1, "before-tenant"))
    first = list(sup.calls)
    deploy.inject(sup, Event("deploy", 7, variant=variant), Stop("w1.0", 1, 7, 7, 1, "after-insert"))
    second = sup.calls[len(first):]
    assert [c[0] for c in second] == ["record", "go"]
    assert second[0][1] == FaultStep.DEPLOY_SKIPPED
    assert [c for c in sup.calls if c[0] == "sigterm"] == [c for c in first if c[0] == "sigterm"]


def test_a_negative_grace_is_a_usage_error(tmp_path):
    sched = tmp_path / "s.json"
    sched.write_text(json.dumps({"jobs": [{"id": 1}], "events": [{"fault": "deploy", "job": 1}]}))
    r = run_cli("replay", str(sched), "--grace", "-1", timeout=60)
    assert r.returncode == 2 and "--grace must be 0 or more" in r.stderr and r.stderr.count("\n") == 1


# --- graceful-completes on hand-written histories ------------------------------------------------------
def _deploy_history(*, grace: float, records, exits=(), killed=False, struck=True):
    from tests.unit.test_properties import budget_exit, history, job, schedule

    sched = schedule(events=[("deploy", 1)])
    sched["events"][0]["variant"] = "rolling"
    injected = [{"t": 1.2, "fault": "deploy", "worker": "w1.0", "job": 1, "attempt": 1, "point": "mid-work",
                 "seconds": grace, "variant": "rolling", "in_hand": [[1, 1]]}] if struck else []
    if killed:
        injected.append({"t": 1.2 + grace, "fault": "grace-kill", "worker": "w1.0", "job": 1, "attempt": 1,
                         "point": "mid-work"})
    return history(records=records, jobs=[job(1), job(2)], exits=list(exits) or [budget_exit("w1.0")],
                   injected=injected, sched=sched)


def test_graceful_completes_on_hand_written_histories():
    from pg_job_chaos.properties import HELD, UNKNOWN, VIOLATED, check
    from tests.unit.test_properties import execution, sane

    def verdict(h):
        r = check(h, ["graceful-completes"])["graceful-completes"]
        return r.status, r.jobs, r.evidence

    done = [*execution("w1.0", 1, 1, 1.0, 2.0), *execution("w1.1", 2, 1, 2.0, 3.0)]
    # the job in hand finished in its worker within the grace (1.05 s needed: 0.05 of work and a lease)
    status, jobs, evidence = verdict(_deploy_history(grace=30.0, records=done))
    assert (status, jobs) == (HELD, ()) and evidence.startswith("1 job"), evidence
    # ... and ran again afterwards, in the replacement
    again = [*done, *execution("w1.1", 1, 2, 2.5, 2.8)]
    status, jobs, evidence = verdict(_deploy_history(grace=30.0, records=again))
    assert (status, jobs) == (VIOLATED, (1,)) and "ran again: w1.1 attempt 2" in evidence
    # SIGKILLed after a grace it should have been enough for
    cut = [*execution("w1.0", 1, 1, 1.0, None), *execution("w1.1", 2, 1, 2.0, 3.0)]
    status, jobs, evidence = verdict(_deploy_history(grace=2.0, records=cut, killed=True))
    assert (status, jobs) == (VIOLATED, (1,)) and "SIGKILLed after it" in evidence
    # a grace shorter than the job needed: not judged here
    status, jobs, evidence = verdict(_deploy_history(grace=0.5, records=cut, killed=True))
    assert status == HELD and evidence.startswith("vacuous") and "shorter grace" in evidence
    # the schedule's deploy never struck: cannot decide
    assert verdict(_deploy_history(grace=30.0, records=done, struck=False))[0] == UNKNOWN
    # no deploy in the schedule: left out of the run's table
    assert "graceful-completes" not in check(sane())
    assert "graceful-completes" in check(_deploy_history(grace=30.0, records=done))


# --- issue 47, item 3: a design's recovery statements ------------------------------------------------
def test_the_built_ins_declare_their_recovery_statements():
    from pg_job_chaos.workers import load_design

    names = ("one-transaction", "lease", "lease-fenced", "lease-heartbeat", "lease-outbox",
             "lease-round-robin")
    got = {d: load_design(d).recovery_statements for d in names}
    assert got == {"one-transaction": (), "lease": ("lease.claim",), "lease-fenced": ("lease.claim",),
                   "lease-heartbeat": ("lease.claim", "lease.sweep"),
                   "lease-outbox": ("lease.claim", "lease.sweep", "outbox.relay_claim"),
                   "lease-round-robin": ("fair.claim_round_robin",)}


def test_a_misdeclared_recovery_statement_is_a_usage_error():
    from pg_job_chaos.workers.builtin.lease import Lease
    from pg_job_chaos.workers.design import DesignHandle

    class Odd(Lease):
        recovery_statements = "lease.claim"  # type: ignore[assignment]  # a string, not a tuple

    with pytest.raises(UsageError, match="recovery_statements 'lease.claim': a tuple of statement"):
        DesignHandle.of(Odd())


def test_restart_and_deploy_strike_first_at_the_recovery_statements_seen():
    from pg_job_chaos.harness.engine import smallscope

    seen = [("sql:lease.claim", False), ("sql:lease.sweep", True), ("sql:lease.finish_fenced", True),
            ("sql:lease.claim:after", False), ("sql:outbox.relay_claim", False)]
    cases = smallscope.recovery_schedules(seen, ("lease.claim", "lease.sweep"),
                                          faults=parse_faults("deploy,restart,kill,crash"),
                                          design="lease-heartbeat", tenant_mode="local", time_scale=0.5)
    struck = [(s.events[0].fault, s.events[0].point, s.events[0].job, s.events[0].variant) for _, s in cases]
    # only the faults that aim at recovery, only before the declared statements, every variant of each
    assert {f for f, *_ in struck} == {"deploy", "restart"}
    assert {p for _, p, *_ in struck} == {"sql:lease.claim", "sql:lease.sweep"}
    assert len(struck) == 2 * (len(DEPLOY_VARIANTS) + 1)
    assert {(p, j) for _, p, j, _ in struck} == {("sql:lease.claim", None), ("sql:lease.sweep", 1)}
    assert all(CATALOGUE[f].aims_at_recovery for f in ("deploy", "restart"))
    assert not [n for n, f in CATALOGUE.items() if f.aims_at_recovery and n not in ("deploy", "restart")]


def test_a_design_names_the_identity_its_worker_gives_its_system():
    """What a deploy's same-identity replacement is given: the old worker's identity as its system saw it
    (a design's ``system_identity``: DBOS's adapter gives the slot, as a restart keeps it)."""
    from pg_job_chaos.workers import load_design
    from pg_job_chaos.workers.builtin.lease import Lease
    from pg_job_chaos.workers.design import DesignHandle

    class BySlot(Lease):
        def system_identity(self, identity: str) -> str:
            return identity.split(".", 1)[0]

    assert load_design("lease").system_identity("w1.3") == "w1.3"
    assert DesignHandle.of(BySlot()).system_identity("w1.3") == "w1"


def test_a_recovery_statement_no_fault_free_run_sent_is_struck_after_a_strand():
    """A recovery that runs only when something is stranded (DBOS's re-enqueue at launch, a rescue): its
    first occurrence comes after a strand, so the pass strands job 1 first -- the job's own transient crash,
    else a kill event -- and aims the fault at the recovery that follows; one the fault-free runs sent keeps
    the plain shape, and without a fault that strands nothing is added."""
    from pg_job_chaos.harness.engine import smallscope

    seen = [("sql:lease.claim", False), ("sql:lease.sweep", False)]
    common = {"design": "lease-heartbeat", "tenant_mode": "local", "time_scale": 0.5}
    cases = smallscope.recovery_schedules(seen, ("lease.claim", "lease.sweep", "lease.rescue"),
                                          faults=parse_faults("restart,crash,kill"),
                                          plain=["sql:lease.claim"], **common)
    by_point: dict[str, list] = {}
    for label, s in cases:
        by_point.setdefault(s.events[-1].point, []).append((label, s))
    assert set(by_point) == {"sql:lease.claim", "sql:lease.sweep", "sql:lease.rescue"}
    (_, plain_case), = by_point["sql:lease.claim"]
    assert plain_case.jobs[0].fault is None and len(plain_case.events) == 1
    for point in ("sql:lease.sweep", "sql:lease.rescue"):  # seen only after faults, or never
        (label, s), = by_point[point]
        assert (s.jobs[0].fault, s.jobs[0].point, s.jobs[0].strikes) == ("crash", "mid-work", 1)
        assert [(e.fault, e.job, e.point) for e in s.events] == [("restart", None, point)]
        assert "after a crash stranded job 1" in label
    # a kill event strands when the job's crash is not allowed
    (_, s), = smallscope.recovery_schedules(seen, ("lease.rescue",), faults=parse_faults("kill,restart"),
                                            plain=[], **common)
    assert s.jobs[0].fault is None
    assert [(e.fault, e.job, e.point) for e in s.events] == [("kill", 1, "mid-work"),
                                                         ("restart", None, "sql:lease.rescue")]
    # nothing strands: a statement the runs showed keeps the plain shape, one they never showed is left out
    (_, s), = smallscope.recovery_schedules(seen, ("lease.sweep", "lease.rescue"),
                                            faults=parse_faults("restart"), plain=[], **common)
    assert s.jobs[0].fault is None
    assert [(e.fault, e.point) for e in s.events] == [("restart", "sql:lease.sweep")]
