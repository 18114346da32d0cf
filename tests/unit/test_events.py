"""The named events (``core/events.py``): every execution-log event, every injected fault record and every
way a run ends that the product writes or compares is a registered name -- no database.

The product's Python is read as syntax (``ast``), so the parts that do not use the registry yet are
checked too: a string literal as the event of a log write (``log.write("x")``, ``ctx.log.write``,
``self._log``, a contract client's ``self.log``), compared with a record's event (``r["event"] == "x"``,
``r.get("event") in ("a", "b")``, a name bound to either: ``ev == "x"``), as a dict's ``"event"``, in a
bytes pattern (``b'"event": "x"'``); an end reason compared with or given as ``ended_by``; a worker exit's
reason compared with an ``outcome`` or written as a ``worker-exit`` record's ``reason``. The contract's
Node client and the Node adapters are read by pattern. A misspelt name raises where it is written
(:meth:`ExecLog.write`) and where a history is read (:meth:`History.executions`).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pg_job_chaos.core.events import (
    END_REASONS,
    EVENTS,
    FAULT_STEPS,
    OLD_EXIT_NAMES,
    WORKER_EXIT_REASONS,
    EndedBy,
    FaultStep,
    LogEvent,
    WorkerExitReason,
    event_of,
    exit_outcome,
)
from pg_job_chaos.core.execlog import ExecLog
from pg_job_chaos.core.history import History
from pg_job_chaos.properties import UNKNOWN, check
from tests.unit.test_properties import execution, history

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("core", "faults", "workers", "properties", "harness", "adapters", "pg_job_chaos")
NODE = ("workers/clients/node", "adapters/node")
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
REGISTRIES = {"LogEvent": LogEvent, "EndedBy": EndedBy, "FaultStep": FaultStep,
              "WorkerExitReason": WorkerExitReason}


def product_files() -> list[Path]:
    return sorted(p for d in PRODUCT for p in (ROOT / d).rglob("*.py") if "node_modules" not in p.parts)


# --- reading the syntax -------------------------------------------------------------------------------
def _own(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of *scope* outside the functions nested in it (a name is bound per function)."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, SCOPES):
            todo.extend(ast.iter_child_nodes(n))


def _key(n: ast.AST, key: str) -> bool:
    """``x["key"]`` or ``x.get("key", ...)``."""
    if isinstance(n, ast.Subscript):
        return isinstance(n.slice, ast.Constant) and n.slice.value == key
    return (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
            and bool(n.args) and isinstance(n.args[0], ast.Constant) and n.args[0].value == key)


def _is_event(n: ast.AST, bound: set[str]) -> bool:
    if isinstance(n, ast.NamedExpr):  # (ev := r["event"]) == "x"
        n = n.value
    # an Effect's answer is the world's event (core/history.py): accepted / duplicate
    return _key(n, "event") or (isinstance(n, ast.Name) and n.id in bound) or (
        isinstance(n, ast.Attribute) and n.attr == "answer")


def _is_outcome(n: ast.AST) -> bool:
    """``x.outcome``: a worker exit's (a reason) or an execution's (ok / fail / info)."""
    return isinstance(n, ast.Attribute) and n.attr == "outcome"


def _is_end(n: ast.AST) -> bool:
    return _key(n, "ended_by") or (isinstance(n, ast.Name) and n.id == "ended_by") or (
        isinstance(n, ast.Attribute) and n.attr == "ended_by")


def _literals(n: ast.AST | None, consts: dict[str, list[str]]) -> list[str]:
    """The strings *n* is, when it is literal: a string, a tuple/list/set of them, either branch of
    ``a if c else b``, a module-level name bound to one of those (a dict: its keys)."""
    if isinstance(n, ast.Constant) and isinstance(n.value, str):
        return [n.value]
    if isinstance(n, ast.Tuple | ast.List | ast.Set):
        return [s for e in n.elts for s in _literals(e, consts)]
    if isinstance(n, ast.IfExp):
        return _literals(n.body, consts) + _literals(n.orelse, consts)
    if isinstance(n, ast.Name):
        return consts.get(n.id, [])
    return []


def _module_constants(tree: ast.Module) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for stmt in tree.body:
        targets = (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                   if isinstance(stmt, ast.AnnAssign) else [])
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.args and \
                value.func.id in ("frozenset", "set", "tuple"):
            value = value.args[0]
        if isinstance(value, ast.Dict):
            strings = [k.value for k in value.keys
                       if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        else:
            strings = _literals(value, {})
        for t in targets:
            if isinstance(t, ast.Name) and strings:
                out[t.id] = strings
    return out


def _is_write(call: ast.Call) -> bool:
    """A write to the execution log: ``log.write(e)``, ``ctx.log.write(e)``, ``self._log(e)``, a client's
    ``self.log(e)``."""
    f = call.func
    if isinstance(f, ast.Name):
        return f.id == "_log"
    if not isinstance(f, ast.Attribute):
        return False
    if f.attr in ("_log", "log"):
        return True
    receiver = f.value
    name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
    return f.attr == "write" and name == "log"


def _returns_end(fn: ast.AST) -> bool:
    r = getattr(fn, "returns", None)
    return (isinstance(r, ast.Name) and r.id == "EndedBy") or (
        isinstance(r, ast.Constant) and r.value == "EndedBy")


BYTES_EVENT = re.compile(rb'"event":\s*"([^"]*)"')


def scan(source: str, name: str = "<src>") -> list[tuple[str, int, str, str]]:
    """``(where, line, kind, literal)`` for every event or end-reason literal in *source*; kind is
    ``write``, ``event`` (compared, a dict's, a bytes pattern) or ``end``."""
    tree = ast.parse(source)
    consts = _module_constants(tree)
    out: list[tuple[str, int, str, str]] = []

    def add(node: ast.AST, kind: str, strings: list[str]) -> None:
        out.extend((name, getattr(node, "lineno", 0), kind, s) for s in strings)

    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, SCOPES))]:
        nodes = list(_own(scope))
        bound: set[str] = set()
        for n in nodes:  # names bound to a record's event in this scope (ev = r.get("event"), ...)
            if isinstance(n, ast.Assign):
                pairs = [(t, n.value) for t in n.targets]
                if isinstance(n.value, ast.Tuple):  # ev, w = r.get("event"), r.get("worker")
                    pairs += [(a, b) for t in n.targets if isinstance(t, ast.Tuple)
                              for a, b in zip(t.elts, n.value.elts, strict=False)]
                bound |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _key(v, "event")}
            elif isinstance(n, ast.NamedExpr) and _key(n.value, "event"):
                bound.add(n.target.id)
        for n in nodes:
            if isinstance(n, ast.Call):
                if _is_write(n) and n.args:
                    add(n, "write", _literals(n.args[0], consts))
                    add(n, "outcome", [s for k in n.keywords if k.arg == "reason"
                                       for s in _literals(k.value, consts)])
                add(n, "end", [s for k in n.keywords if k.arg == "ended_by"
                               for s in _literals(k.value, consts)])
            elif isinstance(n, ast.Compare):
                sides = [n.left, *n.comparators]
                for a, b in zip(sides, sides[1:], strict=False):
                    for x, y in ((a, b), (b, a)):
                        if _is_event(x, bound):
                            add(n, "event", _literals(y, consts))
                        elif _is_end(x):
                            add(n, "end", _literals(y, consts))
                        elif _is_outcome(x):
                            add(n, "outcome", _literals(y, consts))
            elif isinstance(n, ast.Dict):
                for k, v in zip(n.keys, n.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value in ("event", "ended_by"):
                        add(n, "event" if k.value == "event" else "end", _literals(v, consts))
            elif isinstance(n, ast.Constant) and isinstance(n.value, bytes):
                add(n, "event", [m.decode() for m in BYTES_EVENT.findall(n.value)])
            elif isinstance(n, ast.Assign | ast.AnnAssign):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(_is_end(t) for t in targets):
                    add(n, "end", _literals(n.value, consts))
            elif isinstance(n, ast.Return) and _returns_end(scope):
                add(n, "end", _literals(n.value, consts))
    return out


def _not_a_reason(s: str) -> bool:
    """An old worker-exit name, or one a letter or two off a reason; any other outcome passes (an
    execution's ok / fail / info, an exit status, a design's own name)."""
    try:
        return s in OLD_EXIT_NAMES or exit_outcome(s) != s
    except ValueError:
        return True


def _wrong(kind: str, s: str) -> bool:
    if kind == "outcome":
        return _not_a_reason(s)
    return s not in (END_REASONS if kind == "end" else EVENTS)


def _unregistered(found: list[tuple[str, int, str, str]]) -> list[str]:
    return [f"{where}:{line}: {kind} {s!r}" for where, line, kind, s in found if _wrong(kind, s)]


@pytest.fixture(scope="module")
def product() -> list[tuple[str, int, str, str]]:
    found = []
    for p in product_files():
        found += scan(p.read_text(), str(p.relative_to(ROOT)))
    return found


# --- the registry ---------------------------------------------------------------------------------------
def test_the_registry_is_one_set_of_distinct_kebab_case_names():
    for registry in (LogEvent, EndedBy, FaultStep, WorkerExitReason):
        values = [m.value for m in registry]
        assert len(values) == len(set(values))
        for m in registry:
            assert re.fullmatch(r"[a-z]+(-[a-z]+)*", m.value), m
            assert m.name == m.value.upper().replace("-", "_"), m  # LogEvent.POINT_TIMEOUT is "point-timeout"
            assert m == m.value and json.dumps(m) == json.dumps(m.value) and f"{m}" == m.value
    assert EVENTS == {m.value for m in LogEvent} and END_REASONS == {m.value for m in EndedBy}
    assert FAULT_STEPS == {m.value for m in FaultStep}
    assert WORKER_EXIT_REASONS == {m.value for m in WorkerExitReason}
    assert not EVENTS & END_REASONS and not (EVENTS | END_REASONS) & WORKER_EXIT_REASONS


# --- (1) the product's Python -----------------------------------------------------------------------------
def test_every_event_and_end_reason_the_product_writes_or_compares_is_registered(product):
    # The contract's Python client cannot import the registry: its literals stay, and the scan reads them
    # (test_the_scan_finds_every_form_it_checks: every form it checks, misspelt).
    assert {"workers/clients/python/pgjc_body.py", "workers/clients/python/pgjc_contract.py"} <= {
        where for where, *_ in product}
    bad = _unregistered(product)
    assert not bad, "names not in core/events.py:\n" + "\n".join(bad)


def test_every_registry_member_the_product_names_exists():
    """``LogEvent.X`` fails only when its line runs: a misspelt member in a branch no test takes
    would wait for a run. Every one written anywhere is looked up here."""
    bad = []
    for p in product_files():
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in REGISTRIES \
                    and not hasattr(REGISTRIES[n.value.id], n.attr):
                bad.append(f"{p.relative_to(ROOT)}:{n.lineno}: {n.value.id}.{n.attr}")
    assert not bad, bad


def test_every_registered_event_has_a_writer(product):
    """No name in the registry that nothing writes (a stale entry reads as a real event)."""
    written = {s for _, _, kind, s in product if kind == "write"}
    for p in product_files():
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Call) and _is_write(n) and n.args:
                written |= {LogEvent[a.attr].value for a in ast.walk(n.args[0])
                            if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)
                            and a.value.id == "LogEvent"}
    assert EVENTS - written == set()


def test_every_end_reason_but_unknown_is_one_the_supervisor_returns():
    tree = ast.parse((ROOT / "harness/supervisor/loop.py").read_text())
    loop = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_loop")
    returned = {EndedBy[r.value.attr] for r in ast.walk(loop) if isinstance(r, ast.Return)
                and isinstance(r.value, ast.Attribute)}
    assert returned == set(EndedBy) - {EndedBy.UNKNOWN}


BAD_SOURCE = '''
TERMINAL = {"finishd": "ok"}
def f(log, r, h, e):
    log.write("strated")
    ctx.log.write("fualt" if x else "point")
    self._log("efect")
    ev = r.get("event")
    if ev == "fenched" or r["event"] in ("pont", "started") or r.get("event") in TERMINAL:
        pass
    if (kind := r["event"]) != "stament":
        pass
    if h.ended_by == "quiesent" or e.answer == "acepted":
        pass
    if x.outcome == "drained" or x.outcome != "stoped-by-itself" or x.outcome in ("ok", "exit 1"):
        log.write("worker-exit", reason="budgte")
    return {"event": "finised"}, b'{"event": "strated"}', History(ended_by="stall")
'''


def test_the_scan_finds_every_form_it_checks():
    found = {(kind, s) for _, _, kind, s in scan(BAD_SOURCE) if _wrong(kind, s)}
    assert found == {("write", "strated"), ("write", "fualt"), ("write", "efect"), ("event", "fenched"),
                     ("event", "pont"), ("event", "finishd"), ("event", "stament"), ("end", "quiesent"),
                     ("event", "acepted"), ("event", "finised"), ("event", "strated"), ("end", "stall"),
                     ("outcome", "drained"), ("outcome", "stoped-by-itself"), ("outcome", "budgte")}


# --- (2) the contract's clients -------------------------------------------------------------------------
JS_EVENT = [re.compile(r"(?<!console)\.log\(\s*(['\"`])([^'\"`]+)\1"),  # this.log('started', ...)
            re.compile(r"\.event\s*[!=]==?\s*(['\"`])([^'\"`]+)\1"),  # r.event === 'started'
            re.compile(r"\bevent\s*:\s*(['\"`])([^'\"`]+)\1")]  # { event: 'started' }


def node_events() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for d in NODE:
        for p in sorted((ROOT / d).glob("*.js")):
            text = p.read_text()
            out[str(p.relative_to(ROOT))] = {m.group(2) for rx in JS_EVENT for m in rx.finditer(text)}
    return out


def test_the_contract_clients_write_registered_events_and_the_same_ones():
    node = node_events()
    bad = {f: names - EVENTS for f, names in node.items() if names - EVENTS}
    assert not bad, bad
    python = {s for p in (ROOT / "workers/clients/python").glob("*.py")
              for _, _, kind, s in scan(p.read_text(), p.name) if kind in ("write", "event")}
    assert python <= EVENTS, python - EVENTS  # the product scan reads them too; said here by name
    # both runtimes write the contract's records (docs/reference/contract.md, "Records")
    body = {"client-start", "started", "execution-count", "tenant-inherited", "rows-visible", "effect",
            "finished", "failed", "fault", "point", "point-timeout", "statement", "connect"}
    # the Python client also tracks the tenant setting under the job's own statements (the Node one: not)
    assert python == body | {"tenant-statement"}
    assert node["workers/clients/node/pgjc-contract.js"] == body


# --- (3) a misspelt name fails where it is written, and where it is read ------------------------------------
def test_a_misspelt_event_raises_at_write_and_nothing_is_written(tmp_path):
    log = ExecLog(tmp_path / "w1.0.events.jsonl", "w1.0")
    with pytest.raises(ValueError, match="'finshed' is not an execution-log event: 'finished' misspelt"):
        log.write("finshed", job=1, attempt=1)
    with pytest.raises(ValueError):
        log.write(None)  # what a caller without a type checker could pass
    assert log.path.read_bytes() == b""
    log.write(LogEvent.FINISHED, job=1, attempt=1)
    log.write("point-timeout", job=1)  # the string of a member is the member
    log.close()
    lines = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [r["event"] for r in lines] == ["finished", "point-timeout"]
    assert '"event":"finished"' in log.path.read_text()  # the member's string, not its repr (core/jsonline)


def test_a_history_with_an_unknown_event_is_not_read_as_if_it_were_not_there():
    records = execution("w1.0", 1, 1, 1.0, 2.0)
    h = history(records=[*records, {"t": 1.5, "worker": "w1.0", "event": "finshed", "job": 1, "attempt": 1}])
    with pytest.raises(ValueError, match=r"\(worker w1.0, job 1, t 1.5\): 'finshed' is not an execution-log"):
        h.executions()
    with pytest.raises(ValueError):
        h.effects()
    results = check(h)
    assert results["single-commit"].status == UNKNOWN
    assert "'finshed' is not an execution-log event" in results["single-commit"].evidence
    assert event_of(records[-1]) is LogEvent.FINISHED


def test_a_designs_own_event_is_written_and_passed_over(tmp_path):
    """A user's design may log its own events (docs/guides/own-worker.md): far from every registered
    name, it is written as it is, and the readers and properties pass over it."""
    log = ExecLog(tmp_path / "w1.0.events.jsonl", "w1.0")
    log.write("probe", job=1, before=None)
    log.close()
    assert json.loads(log.path.read_text())["event"] == "probe"
    records = execution("w1.0", 1, 1, 1.0, 2.0)
    plain, with_probe = history(records=records), history(records=[*records, {"t": 1.5, "worker": "w1.0",
                                                                                "event": "probe", "job": 1}])
    assert [e.outcome for e in with_probe.executions()] == [e.outcome for e in plain.executions()]
    assert {k: r.status for k, r in check(with_probe).items()} == \
        {k: r.status for k, r in check(plain).items()}


def test_histories_keep_their_json():
    h = history(records=execution("w1.0", 1, 1, 1.0, 2.0), ended_by=EndedBy.QUIESCENT)
    same = history(records=execution("w1.0", 1, 1, 1.0, 2.0), ended_by="quiescent")
    assert h.to_json() == same.to_json() and '"ended_by": "quiescent"' in h.to_json()
    assert History.from_dict(json.loads(h.to_json())).to_json() == h.to_json()
    assert History.from_dict(json.loads(h.to_json())).ended_by == EndedBy.QUIESCENT


# --- the injected fault records ------------------------------------------------------------------------
def test_every_supervisor_fault_records_its_strike_under_a_registered_name():
    """A strike's record is its fault's catalogue name, a :class:`FaultStep` member; every step a fault
    records is one (the faults run against a recording SupervisorAPI: test_fault_needs.FakeAPI, which
    refuses any other name), and every registered step is recorded by some fault."""
    from pg_job_chaos.core.schedule import Event
    from pg_job_chaos.faults.api import Stop
    from pg_job_chaos.faults.catalogue import CATALOGUE
    from tests.unit.test_fault_needs import FakeAPI

    supervisor = {n for n, f in CATALOGUE.items() if f.kind == "supervisor"}
    assert supervisor <= FAULT_STEPS
    recorded = set()
    for name in supervisor:
        f = CATALOGUE[name]
        for variant in f.variants or ("xid",):
            sup = FakeAPI()
            f.inject(sup, Event(name, 1, variant=variant), Stop("w1.0", 1, 7, 1, 1, "mid-work"))
            sup.run_later()
            recorded |= {c[1] for c in sup.calls if c[0] == "record"}
    # failover-skipped: a pair with no standby left; commit-wait-cancelled: a commit that waited;
    # deploy-skipped: a second deploy of a worker already terminating (test_deploy_schedule.py)
    assert FAULT_STEPS - recorded == {FaultStep.FAILOVER_SKIPPED, FaultStep.COMMIT_WAIT_CANCELLED,
                                      FaultStep.DEPLOY_SKIPPED}


def test_a_misspelt_injected_record_fails_where_it_is_written():
    from types import SimpleNamespace

    from pg_job_chaos.core.schedule import Event, JobSpec, Schedule
    from pg_job_chaos.faults.api import Stop
    from pg_job_chaos.harness.supervisor.strikes import Strikes

    strikes = Strikes(Schedule(jobs=(JobSpec(id=1),)), {"w1.0": SimpleNamespace(slot=1)}, None)
    stop = Stop("w1.0", 1, 7, 1, 1, "mid-work")
    with pytest.raises(ValueError, match="'primary-stoped' is not a valid FaultStep"):
        strikes.record("primary-stoped", Event("failover", 1), stop)  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match="PRIMARY_STOPED"):
        strikes.record(FaultStep.PRIMARY_STOPED, Event("failover", 1), stop)  # type: ignore[attr-defined]
    assert strikes.injected == []
    strikes.record(FaultStep.PRIMARY_STOPPED, Event("failover", 1), stop)
    strikes.record(FaultStep("promoted"), Event("failover", 1), stop, seconds=0.5)
    assert [(i["fault"], i.get("seconds")) for i in strikes.injected] == [("primary-stopped", None),
                                                                          ("promoted", 0.5)]
    assert json.dumps(strikes.injected[0]["fault"]) == '"primary-stopped"'  # the saved history's string


def test_the_promotions_are_read_in_one_place():
    injected = [{"t": 3.0, "fault": "primary-stopped"}, {"t": 1.0, "fault": FaultStep.PRIMARY_STOPPED},
                {"t": 2.0, "fault": "promoted"}, {"fault": "primary-stopped"}]
    assert history(injected=injected).promotions() == [1.0, 3.0]
    assert history().promotions() == []
    for p in product_files():  # no reader spells the record itself
        if p.name != "events.py":
            assert '"primary-stopped"' not in p.read_text(), p
