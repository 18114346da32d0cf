"""A back end's capabilities are types (``core/server.py``): the local server is ``Restartable``, the
replicated pair ``Replicated``; the supervisor offers them to the faults as typed members and keeps one
``ServerState``; nobody probes a server object for what it can do. An event's variant defaults to its
fault's first. No database: the pair's own side is ``tests/integration/test_replica.py``."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from pg_job_chaos.core.errors import HarnessError, UsageError
from pg_job_chaos.core.events import FaultStep
from pg_job_chaos.core.schedule import DEFAULT_VARIANT, Event, JobSpec, Schedule, default_variant
from pg_job_chaos.core.server import Cut, Promotion, Replicated, Restartable
from pg_job_chaos.faults.api import Stop
from pg_job_chaos.faults.catalogue import CATALOGUE, check_schedule
from pg_job_chaos.harness.postgres.local import LocalServer
from pg_job_chaos.harness.postgres.replica import Pair
from pg_job_chaos.harness.supervisor.server_state import ServerState
from pg_job_chaos.harness.supervisor.strikes import Strikes

ROOT = Path(__file__).resolve().parents[2]
# Names a server object goes by where the harness holds one (a Database, its capabilities, the pair).
SERVER_NAMES = {"server", "database", "db", "pair", "replica", "control"}
BOUNDARY = {"workers/design.py", "workers/loading.py"}  # where a design object may be probed


class Server:
    """A Restartable and Replicated back end that keeps what was asked of it (no PostgreSQL)."""

    mode = "async"

    def __init__(self, *, standby: bool = True):
        self.calls: list[str] = []
        self.standby = standby
        self.promotions: list[float] = []
        self.resets: list[float] = []

    def crash(self, janitor=None) -> None:
        self.calls.append("crash")

    def start_again(self, janitor=None) -> None:
        self.calls.append("start_again")
        self.promotions.append(0.25)

    def cut_standby(self) -> Cut | None:
        self.calls.append("cut")
        return Cut("0/3000000") if self.standby else None

    def arm_switchover(self) -> bool:
        self.calls.append("switchover")
        return self.standby

    def cancel_commit_waits(self) -> tuple[int, ...]:
        self.calls.append("cancel")
        return (41,) if self.standby else ()

    def last_promotion(self) -> Promotion | None:
        return Promotion(self.promotions[-1]) if self.promotions else None

    def settle(self) -> float | None:
        return None

    def one_host_dsn(self, dsn: str) -> str:
        return dsn


class Admin:
    def __init__(self):
        self.reconnects = 0

    def reconnect(self) -> None:
        self.reconnects += 1


def _strikes(server=None, replica=None, state=None) -> Strikes:
    # time scale 0.01: a fault's duration (two leases) is 20 ms of the test's
    return Strikes(Schedule(jobs=(JobSpec(id=1),), time_scale=0.01), {}, Admin(), server=server,
                   replica=replica, state=state)


def test_the_back_ends_implement_their_capabilities():
    """Checked statically too (.ci/typecheck: provisioning assigns them to the typed fields); here the
    members are there, and a new Replicated member the pair lacks fails."""
    for cls, protocols in ((LocalServer, (Restartable,)), (Pair, (Restartable, Replicated))):
        members = {n for p in protocols for n in vars(p) if not n.startswith("_")}
        missing = {m for m in members if not hasattr(cls, m) and m not in cls.__dataclass_fields__}
        assert not missing, (cls.__name__, missing)


def test_the_server_state_has_one_owner_and_the_strikes_keep_it():
    state = ServerState()
    server = Server()
    strikes = _strikes(server=server, replica=server, state=state)
    assert (state.down, state.restarts, state.downtime, state.started_at) == (False, 0, 0.0, -math.inf)
    strikes.start_server()  # not down: nothing to start
    assert server.calls == []
    assert strikes.cut_standby() == Cut("0/3000000")
    assert state.down and state.down_since is None and state.restarts == 0  # a failover under way
    strikes.stop_server()
    assert state.down and state.down_since is not None and state.restarts == 1
    strikes.start_server()
    assert not state.down and state.down_since is None and state.downtime > 0
    assert server.calls == ["cut", "crash", "start_again"] and strikes.admin.reconnects == 1
    assert state.recovering(state.started_at + 1.0, within=8.0)
    assert not state.recovering(state.started_at + 9.0, within=8.0)
    assert state.deadline_extension(8.0) == 8.0 + state.downtime
    assert strikes.last_promotion() == Promotion(0.25)


def test_a_pair_with_no_standby_left_answers_without_a_failover_under_way():
    state = ServerState()
    server = Server(standby=False)
    strikes = _strikes(server=server, replica=server, state=state)
    assert strikes.cut_standby() is None and not state.down
    assert strikes.arm_switchover() is False and strikes.cancel_commit_waits() == ()


def test_a_capability_the_back_end_lacks_is_a_harness_error():
    strikes = _strikes()
    with pytest.raises(HarnessError, match="needs the local server"):
        strikes.stop_server()
    for member in (strikes.cut_standby, strikes.arm_switchover, strikes.cancel_commit_waits,
                   strikes.last_promotion):
        with pytest.raises(HarnessError, match="needs the replicated back end"):
            member()


def test_the_failover_fault_drives_the_typed_members_and_records_registered_steps():
    state = ServerState()
    server = Server()
    strikes = _strikes(server=server, replica=server, state=state)
    go = []
    strikes.go = go.append  # type: ignore[method-assign]  -- no worker to let go on
    stop = Stop("w1.0", 1, 7, 1, 1, "mid-work")
    CATALOGUE["failover-cancel"].inject(strikes, Event("failover-cancel", 1), stop)
    assert state.down and go == [stop]
    strikes.run_due(math.inf)  # the first cancel poll; the promotion (it cancels once more, then promotes)
    strikes.run_due(math.inf)
    steps = [i["fault"] for i in strikes.injected]
    assert steps[0] == FaultStep.FAILOVER_CANCEL and strikes.injected[0]["primary_lsn"] == "0/3000000"
    assert FaultStep.COMMIT_WAIT_CANCELLED in steps and steps[-2:] == ["primary-stopped", "promoted"]
    assert strikes.injected[-1]["seconds"] == 0.25 and not state.down and state.restarts == 1
    assert all(isinstance(s, FaultStep) for s in steps)
    cancelled = [i["backends"] for i in strikes.injected if i["fault"] == "commit-wait-cancelled"]
    assert cancelled[0] == [41]
    json.dumps(strikes.injected)  # the history's JSON


def test_no_server_object_is_probed_for_what_it_can_do():
    """No ``getattr``/``hasattr`` on a server object in the product (a capability is a type), and none
    on a design object outside the design boundary modules."""
    bad = []
    for d in ("core", "faults", "properties", "harness", "workers", "pg_job_chaos"):
        for p in sorted((ROOT / d).rglob("*.py")):
            rel = str(p.relative_to(ROOT))
            for n in ast.walk(ast.parse(p.read_text())):
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                        and n.func.id in ("getattr", "hasattr") and n.args):
                    continue
                target = n.args[0]
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
                design = name in ("design", "handle") and rel not in BOUNDARY
                if name in SERVER_NAMES or design:
                    bad.append(f"{rel}:{n.lineno}: {ast.unparse(n)}")
    assert not bad, bad


# --- an event's variant ------------------------------------------------------------------------------------
def test_an_events_variant_defaults_to_its_faults_first():
    assert Event("horizon", 1).variant == "xid"
    assert Event("failover", 1).variant == "lagging" == default_variant("failover")
    for name, f in CATALOGUE.items():
        if f.kind == "supervisor":
            assert Event(name, 1).variant == (f.variants[0] if f.variants else DEFAULT_VARIANT), name
    assert Event("failover", 1, variant="switchover").variant == "switchover"
    assert Event("no-such-fault", 1).variant == DEFAULT_VARIANT


def test_saved_schedules_read_as_they_did():
    """A saved event names its variant (Schedule.to_dict): it reads back unchanged, an old failover
    event's ``xid`` included (the fault strikes it as lagging, as it did); one that names none (a
    hand-written file) takes the fault's first; an empty one is still refused."""
    data = {"jobs": [{"id": 1}], "events": [{"fault": "failover", "job": 1, "variant": "xid"},
                                            {"fault": "failover", "job": 1}, {"fault": "pause", "job": 1}]}
    s = Schedule.from_dict(data, validators=[check_schedule])
    assert [e.variant for e in s.events] == ["xid", "lagging", "xid"]
    assert [e["variant"] for e in s.to_dict()["events"]] == ["xid", "lagging", "xid"]
    assert Schedule.from_dict(json.loads(s.to_json()), validators=[check_schedule]) == s
    data["events"][0]["variant"] = ""
    with pytest.raises(UsageError, match=r"events\[0\]\.variant: a name"):
        Schedule.from_dict(data)


def test_the_network_and_replica_members_replace_the_string_actions():
    from pg_job_chaos.faults.api import SupervisorAPI

    members = set(dir(SupervisorAPI))
    assert not members & {"network", "replica"}
    assert {"add_latency", "reset_connections", "partition", "heal", "lose_commit_reply", "cut_standby",
            "arm_switchover", "cancel_commit_waits", "last_promotion"} <= members
