"""A supervisor fault is one catalogue entry: it declares what a run needs for it (one slot, durable
settings, the local server, the network and its action, root and nftables, its variants, whether it
strikes last), what it does agrees with that, and the harness derives its choices from the
declarations, never from the fault's name. No database."""

from __future__ import annotations

import signal
import socket
import threading
from types import SimpleNamespace

import pytest

from pg_job_chaos.core.errors import HarnessError, UsageError
from pg_job_chaos.core.events import FaultStep
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
from pg_job_chaos.core.server import Cut, Promotion
from pg_job_chaos.faults.api import NETWORK_ACTIONS, NetworkAction, Stop
from pg_job_chaos.faults.catalogue import CATALOGUE, VARIANTS, Fault, entries, event_variant
from pg_job_chaos.harness import session
from pg_job_chaos.harness.engine import smallscope
from pg_job_chaos.harness.net import network
from pg_job_chaos.harness.postgres import ServerSpec
from pg_job_chaos.harness.postgres.local import DURABLE_SETTINGS
from pg_job_chaos.harness.supervisor.loop import Supervisor
from pg_job_chaos.harness.supervisor.strikes import Strikes
from pg_job_chaos.workers import load_design

# Every supervisor fault and what it declares beyond the defaults. A new supervisor fault must be
# added here: the test below fails until it says what it needs.
DECLARED = {
    "kill": {"strikes_last": True},
    "pause": {},
    "horizon": {"variants": ("xid", "repeatable-read")},
    "terminate": {},
    "latency": {"network": "latency"},
    "partition": {"network": "partition", "needs_root_nftables": True},
    "reset": {"network": "reset"},
    "lost-commit-reply": {"network": "lose-commit-reply"},
    "restart": {"needs_one_slot": True, "needs_durable_settings": True, "needs_local_server": True,
                "breaks_every_session": True},
    "failover": {"needs_one_slot": True, "needs_replica": True, "breaks_every_session": True,
                 "variants": ("lagging", "switchover", "demote-in-place")},
    "failover-cancel": {"needs_one_slot": True, "needs_replica": True, "breaks_every_session": True},
    "deploy": {"variants": ("rolling", "same-identity", "drain",
                            "rolling-all", "same-identity-all", "drain-all")},
}
NEEDS = {"needs_one_slot": False, "needs_durable_settings": False, "needs_local_server": False,
         "breaks_every_session": False, "network": None, "needs_root_nftables": False, "variants": (),
         "strikes_last": False, "needs_replica": False}


def _supervisor_faults() -> dict[str, Fault]:
    return {n: f for n, f in CATALOGUE.items() if f.kind == "supervisor"}


def test_every_supervisor_fault_declares_its_needs():
    assert set(_supervisor_faults()) == set(DECLARED)
    for name, f in _supervisor_faults().items():
        got = {k: getattr(f, k) for k in NEEDS}
        assert got == {**NEEDS, **DECLARED[name]}, name
        assert f.needs_network == (f.network is not None)
        assert f.network is None or f.network in NETWORK_ACTIONS
        assert not f.needs_root_nftables or f.needs_network, name  # nftables drop the proxy's port
        # the Event default (xid) is its first variant: horizon's xid, failover's lagging
        assert not f.variants or event_variant(name, "xid") == f.variants[0], name
    for f in CATALOGUE.values():
        if f.kind == "job":  # a job fault needs nothing of the run
            assert {k: getattr(f, k) for k in NEEDS} == NEEDS, f.name
    assert VARIANTS == ("xid", "repeatable-read")  # what the strategies draw: keeps old seeds' schedules


class FakeAPI:
    """A SupervisorAPI that records what a fault asks of it; timers run when :meth:`run_later` says."""

    def __init__(self):
        self.calls: list[tuple] = []
        self._later: list = []

    def record(self, step, event, stop, **fields):
        self.calls.append(("record", FaultStep(step)))  # a registered name, or a ValueError

    def event_seconds(self, event):
        return 1.0

    def signal_worker(self, worker, sig):
        self.calls.append(("signal", sig))

    def go(self, stop):
        self.calls.append(("go",))

    def later(self, delay, fn):
        self._later.append(fn)

    def open_holder(self, variant):
        self.calls.append(("open_holder", variant))
        return SimpleNamespace(backend_pid=42)

    def close_holder(self, holder):
        self.calls.append(("close_holder",))

    def terminate_backend(self, pid):
        self.calls.append(("terminate", pid))

    def latency_seconds(self):
        return 0.05

    def add_latency(self, worker, seconds):
        self.calls.append(("network", NetworkAction.LATENCY))

    def reset_connections(self, worker):
        self.calls.append(("network", NetworkAction.RESET))

    def partition(self, worker):
        self.calls.append(("network", NetworkAction.PARTITION))

    def heal(self, worker):
        self.calls.append(("network", NetworkAction.HEAL))

    def lose_commit_reply(self, worker, backend):
        self.calls.append(("network", NetworkAction.LOSE_COMMIT_REPLY))

    def stop_server(self):
        self.calls.append(("stop_server",))

    def start_server(self):
        self.calls.append(("start_server",))

    def cut_standby(self):
        self.calls.append(("replica", "cut"))
        return Cut(primary_lsn="0/0")

    def arm_switchover(self):
        self.calls.append(("replica", "switchover"))
        return True

    def cancel_commit_waits(self):
        self.calls.append(("replica", "cancel-waits"))
        return ()

    def last_promotion(self):
        self.calls.append(("replica", "last-promotion"))
        return Promotion(seconds=0.1)

    # the deploy fault: two workers, the one at the point (w1.0) and another; a terminated one has gone
    # by the time a timer looks (drain), and is still there when the grace ends (grace-kill recorded)
    def grace_seconds(self):
        return 6.0

    def live_workers(self):
        return ("w1.0", "w2.0")

    def worker_alive(self, worker):
        return False

    def terminate_worker(self, worker):
        self.calls.append(("sigterm", worker))
        return {7: 1} if worker == "w1.0" else {}

    def kill_after_grace(self, worker):
        self.calls.append(("kill_after_grace", worker))
        return True

    def start_replacement(self, worker, *, same_identity):
        self.calls.append(("replacement", worker, same_identity))
        return worker.split(".")[0] + ".1"

    def system_identity(self, worker):
        return worker

    def demote_primary(self):
        self.calls.append(("replica", "demote"))
        return Promotion(seconds=0.1)

    def run_later(self):
        for fn in self._later:
            fn()
        self._later.clear()


# The variants whose sessions stay open though their fault breaks every session in its others (the
# catalogue's flag is the fault's: the runner's admin session reconnects after any failover)
KEEPS_SESSIONS = {"demote-in-place"}


@pytest.mark.parametrize("name,variant", [(n, v) for n in sorted(DECLARED)
                                          for v in CATALOGUE[n].variants or ("xid",)])
def test_what_a_fault_does_agrees_with_what_it_declares(name, variant):
    f = CATALOGUE[name]
    sup = FakeAPI()
    f.inject(sup, Event(name, 1, variant=variant), Stop("w1.0", 1, 7, 1, 1, "mid-work"))
    sup.run_later()
    actions = [c[1] for c in sup.calls if c[0] == "network"]
    assert set(actions) <= set(NETWORK_ACTIONS)
    assert (actions[:1] or [None])[0] == f.network  # it strikes with the action it declares, first
    # a restart stops the local server, a failover the replicated back end's primary
    stops = ("stop_server",) in sup.calls
    assert stops == (f.needs_local_server or f.needs_replica) == f.breaks_every_session \
        or (variant in KEEPS_SESSIONS and not stops and ("replica", "demote") in sup.calls)
    assert any(c[0] == "replica" for c in sup.calls) == f.needs_replica
    assert any(c[0] == "open_holder" for c in sup.calls) == ("xid" in f.variants)
    killed = ("signal", signal.SIGKILL) in sup.calls
    assert killed == f.strikes_last and (("go",) not in sup.calls) == killed  # nothing after a kill


def test_a_catalogue_entry_with_an_unknown_network_action_is_refused():
    with pytest.raises(ValueError, match="unknown network action 'jam'"):
        Fault("jam", "supervisor", "x", network="jam")


def test_the_network_actions_are_typed_members_and_need_the_runs_network():
    with pytest.raises(ValueError, match="'jam' is not a valid NetworkAction"):
        NetworkAction("jam")
    assert all(isinstance(a, str) for a in NETWORK_ACTIONS)  # a member is its string: the catalogue's

    class Net:
        def __init__(self):
            self.applied = []

        def latency(self, slot, seconds):
            self.applied.append((slot, "latency", seconds))

        def reset(self, slot):
            self.applied.append((slot, "reset"))

    strikes = Strikes(Schedule(jobs=(JobSpec(id=1),)), {"w1.0": SimpleNamespace(slot=1)}, None, network=Net())
    strikes.add_latency("w1.0", 0.5)
    strikes.reset_connections("w1.0")
    assert strikes.net.applied == [(1, "latency", 0.5), (1, "reset")]
    with pytest.raises(HarnessError, match="a network fault without the run's network"):
        Strikes(Schedule(jobs=(JobSpec(id=1),)), {}, None).partition("w1.0")


@pytest.fixture
def listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    threading.Thread(target=lambda: _accept(srv), daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()


def _accept(srv):
    while True:
        try:
            srv.accept()
        except OSError:
            return


def test_the_network_applies_every_known_action(listener, monkeypatch):
    dropped = []
    monkeypatch.setattr(network.partition, "drop", lambda port: dropped.append(port) or f"t{port}")
    monkeypatch.setattr(network.partition, "heal", lambda table: dropped.remove(int(table[1:])))
    net = network.Network(f"host=127.0.0.1 port={listener} dbname=x user=x", 1)
    try:
        net.latency(1, 0.01)
        net.reset(1)
        net.partition(1)
        assert dropped == [net.proxies.ports[1]]
        net.heal(1)
        net.lose_commit_reply(1, None)
        assert dropped == []  # partitioned, then healed
    finally:
        net.close()


def _args(**kw):
    return ServerSpec(**kw)


def test_slot_count_derives_from_needs_one_slot():
    whole = Fault("whole-server", "supervisor", "reaches the whole server", needs_one_slot=True)
    other = Fault("other", "supervisor", "reaches one worker")
    assert session.slot_count(_args(), [whole], 3) == 1
    assert session.slot_count(_args(), [other, "pause", "partition"], 3) == 3
    assert session.slot_count(_args(), ["restart"], 3) == 1  # by name: its catalogue entry
    assert session.slot_count(_args(pooler="pgbouncer"), [other], 3) == 1


def test_a_name_declared_one_slot_in_the_catalogue_gives_one_slot(monkeypatch):
    monkeypatch.setitem(CATALOGUE, "whole-server",
                        Fault("whole-server", "supervisor", "x", needs_one_slot=True))
    assert session.slot_count(_args(), ["whole-server"], 3) == 1
    monkeypatch.setitem(CATALOGUE, "restart",
                        Fault("restart", "supervisor", "x"))  # the name is not what counts
    assert session.slot_count(_args(), ["restart"], 3) == 3


def test_server_settings_derive_from_the_declarations(monkeypatch):
    monkeypatch.setattr(session.partition, "available", lambda: None)
    durable = Fault("durable", "supervisor", "x", needs_durable_settings=True)
    local = Fault("stops-it", "supervisor", "x", needs_local_server=True)
    nft = Fault("drops", "supervisor", "x", network="partition", needs_root_nftables=True)
    assert session.server_settings(_args(), ["pause", "latency"]) is None
    assert session.server_settings(_args(), [durable]) == DURABLE_SETTINGS
    assert session.server_settings(_args(), ["restart"]) == DURABLE_SETTINGS
    assert session.server_settings(_args(), [local]) is None
    assert session.server_settings(_args(postgres="docker"), [durable]) == DURABLE_SETTINGS
    with pytest.raises(UsageError, match="the stops-it fault needs the local server"):
        session.server_settings(_args(postgres="docker"), [local])
    with pytest.raises(UsageError, match="the restart fault needs the local server"):
        session.server_settings(_args(postgres="docker"), ["restart"])
    assert session.server_settings(_args(), [nft]) is None
    monkeypatch.setattr(session.partition, "available", lambda: "no nft here")
    with pytest.raises(HarnessError, match="no nft here"):
        session.server_settings(_args(), [nft])
    assert session.server_settings(_args(), ["latency", "reset"]) is None  # the proxy needs no nftables


def test_entries_take_names_and_entries_and_skip_what_is_not_a_fault():
    pause = CATALOGUE["pause"]
    assert entries(["pause", pause, "healed", None, "crash"]) == (pause, pause, CATALOGUE["crash"])


def test_variants_come_from_the_declarations():
    assert event_variant("horizon", "repeatable-read") == "repeatable-read"
    assert event_variant("pause", "repeatable-read") == "xid"
    assert event_variant("no-such-fault", "repeatable-read") == "xid"
    two = Fault("two-ways", "supervisor", "x", variants=("xid", "repeatable-read"))
    cases = list(smallscope._cases([two, CATALOGUE["pause"]], ("mid-work",)))
    assert [(c[1], c[3]) for c in cases] == [(None, "xid"), ("two-ways", "xid"),
                                             ("two-ways", "repeatable-read"), ("pause", "xid")]


def test_failover_draws_each_of_its_variants_and_a_saved_one_validates():
    """failover has more variants than the drawn positions (VARIANTS): it draws its own, so a search
    reaches demote-in-place; the small-scope pass tries each; a schedule naming it checks clean."""
    from hypothesis import HealthCheck, given, settings

    from pg_job_chaos.faults.catalogue import check_schedule, draws_own_variant
    from pg_job_chaos.properties.strategies import schedules

    failover = CATALOGUE["failover"]
    assert draws_own_variant("failover") and "demote-in-place" in failover.variants
    seen: set[str] = set()

    @settings(max_examples=80, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(schedules(faults=[failover], design="lease"))
    def draw(s):
        seen.update(e.variant for e in s.events)

    draw()
    assert seen == set(failover.variants)
    cases = {c[3] for c in smallscope._cases([failover], ("mid-work",)) if c[1] == "failover"}
    assert cases == set(failover.variants)
    problems: list[str] = []
    check_schedule(Schedule(jobs=(JobSpec(id=1),), events=(Event("failover", 1, variant="demote-in-place"),)),
                   problems.append)
    assert problems == []


def test_the_supervisor_starts_the_network_for_a_fault_that_declares_one(tmp_path, monkeypatch):
    design = load_design("lease")

    def uses(*faults):
        s = Schedule(jobs=(JobSpec(id=1),), events=tuple(Event(f, 1) for f in faults))
        return Supervisor(s, design.for_run(s), admin_dsn="", worker_dsn="", run_dir=tmp_path).uses_network

    assert not uses() and not uses("pause", "restart", "horizon")
    assert uses("latency") and uses("pause", "partition") and uses("reset") and uses("lost-commit-reply")
    monkeypatch.setitem(CATALOGUE, "jam", Fault("jam", "supervisor", "x", network="latency"))
    assert uses("jam")


def test_a_fault_that_strikes_last_goes_after_the_others(monkeypatch):
    order = []
    for name, last in (("first", True), ("second", False), ("third", False)):
        monkeypatch.setitem(CATALOGUE, name, Fault(name, "supervisor", "x", strikes_last=last,
                                                   inject=lambda sup, e, stop: order.append(e.fault)))
    s = Schedule(jobs=(JobSpec(id=1),), events=(Event("first", 1), Event("second", 1), Event("third", 1)))
    w = SimpleNamespace(identity="w1.0", pid=1, alive=True, go=lambda: order.append("go"))
    Strikes(s, {"w1.0": w}, None).at_point(w, {"job": 1, "point": "mid-work", "attempt": 1})
    assert order == ["second", "third", "first"]


def test_failover_needs_the_replicated_back_end_and_restart_refuses_it():
    """The failover faults need ``replica``; restart (it stops one server) refuses a pair; a pair refuses
    what it cannot combine with (a DSN, docker, a pooler, PostgreSQL 15) with a message naming the field."""
    with pytest.raises(UsageError, match="replicated back end"):
        session.server_settings(ServerSpec(), ["failover"])
    with pytest.raises(UsageError, match="replicated back end"):
        session.server_settings(ServerSpec(), ["failover-cancel"])
    assert session.server_settings(ServerSpec(replica="async"), ["failover"]) is None
    with pytest.raises(UsageError, match="restart fault does not combine"):
        session.server_settings(ServerSpec(replica="sync"), ["restart"])
    for bad in ({"postgres": "host=x dbname=y"}, {"postgres": "docker"}, {"pooler": "pgbouncer"},
                {"pg_version": 15}, {}):
        with pytest.raises(UsageError, match="replica"):
            ServerSpec(replica="async" if bad else "semi", **bad)
    assert session.slot_count(ServerSpec(replica="async"), ["failover"], 4) == 1


def test_one_host_clients_get_the_endpoint_on_the_pair_and_the_others_the_multi_host_dsn():
    from pg_job_chaos.adapters.awa import Awa
    from pg_job_chaos.adapters.dbos import Dbos
    from pg_job_chaos.adapters.graphile import GraphileWorker
    from pg_job_chaos.adapters.pgboss import PgBoss
    from pg_job_chaos.adapters.procrastinate import Procrastinate
    from pg_job_chaos.harness.net.endpoint import Endpoint
    from pg_job_chaos.harness.runner import Runner
    from pg_job_chaos.workers import QueueDesign, load_design
    from pg_job_chaos.workers.hosted import HostedDesign

    # declared by the design, not known to the harness by name: the four whose client takes one host
    assert Awa.one_host and Dbos.one_host and PgBoss.one_host and GraphileWorker.one_host
    assert not (Procrastinate.one_host or HostedDesign.one_host or QueueDesign.one_host)
    multi = "host=127.0.0.1,127.0.0.1 port=5,6 user=u password=p dbname=d target_session_attrs=read-write"
    pair = SimpleNamespace(one_host_dsn=lambda dsn: Endpoint.dsn(SimpleNamespace(port=7), dsn))
    runner = SimpleNamespace(database=SimpleNamespace(replica=pair, worker_dsn=multi))
    awa = load_design("awa")
    assert awa.one_host
    one = Runner._worker_dsn(runner, awa)
    assert "host=127.0.0.1 " in one and "port=7" in one and "target_session_attrs" not in one
    assert "password=p" in one and "dbname=d" in one
    # by its module:attr, as a plug-in names it: the same declaration
    assert Runner._worker_dsn(runner, load_design("pg_job_chaos.adapters.awa:Awa")) == one
    assert Runner._worker_dsn(runner, load_design("procrastinate")) == multi
    assert Runner._worker_dsn(runner, load_design("lease")) == multi
    runner.database.replica = None
    assert Runner._worker_dsn(runner, awa) == multi


def test_a_multi_host_dsn_becomes_libpqs_multi_host_url():
    from psycopg import conninfo

    from pg_job_chaos.workers.hosted.contract import url

    u = url("host=127.0.0.1,127.0.0.1 port=5,6 user=u password=p dbname=d target_session_attrs=read-write")
    assert u == "postgresql://u:p@127.0.0.1:5,127.0.0.1:6/d?target_session_attrs=read-write"
    parsed = conninfo.conninfo_to_dict(u)
    assert (parsed["host"], parsed["port"]) == ("127.0.0.1,127.0.0.1", "5,6")
    assert url("host=127.0.0.1 port=5 user=u dbname=d") == "postgresql://u@127.0.0.1:5/d"
