"""Adapters as declarations (workers/hosted/declared.py): a status map and named SQL make ``pending``,
``final_states`` and ``accepted_finishes``, as the worker contract's descriptor does -- no database:
a connection that answers each statement with rows of named columns."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
from psycopg import conninfo

from pg_job_chaos.core import sqlfile
from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.workers.hosted import STATES, HostedDesign, declared
from pg_job_chaos.workers.hosted import protocol as hosted
from pg_job_chaos.workers.hosted.contract import ContractDesign
from pg_job_chaos.workers.hosted.declared import DeclaredDesign

STATEMENTS = """
-- name: pending
select count(*) from q where state in ('new', 'busy') and %(queue)s is not null;

-- name: final_states
select job_id as id, state as status, tries as attempts, %(stale)s as lease_expired from q;

-- name: reset
truncate q;
"""


class Cursor:
    def __init__(self, columns: str, rows: list[tuple]):
        self.description = [SimpleNamespace(name=c) for c in columns.split()]
        self.rows = rows

    def __iter__(self):
        return iter(self.rows)


class Conn:
    """Answers the statement that starts with a key of *answers*; keeps what was sent."""

    def __init__(self, answers: dict[str, tuple[str, list[tuple]]]):
        self.answers, self.sent = answers, []

    def execute(self, query: str, params=None):
        self.sent.append((query, params))
        for start, (columns, rows) in self.answers.items():
            if query.startswith(start):
                return Cursor(columns, rows)
        return Cursor("", [])


@pytest.fixture
def queries(tmp_path):
    path = tmp_path / "q.sql"
    path.write_text(STATEMENTS)
    return sqlfile.load(str(tmp_path / "q.py"), "q.sql", "pending", "final_states")


def design(queries, **attrs) -> DeclaredDesign:
    class Queue(DeclaredDesign):
        name = "queue"
        STATUS = {"new": "queued", "busy": "running", "ok": "done"}
        SQL = queries

        def sql_params(self):
            return {"queue": "q1", "stale": True, "unused": 1}

    for k, v in attrs.items():
        setattr(Queue, k, v)
    return Queue().for_run(Schedule(jobs=(JobSpec(1, tenant=7), JobSpec(2, tenant=8))))


def test_final_states_are_the_declared_rows_mapped(queries):
    rows = [(1, "ok", 1, None), (2, "lost", 0, True)]
    conn = Conn({"select job_id": ("id status attempts lease_expired", rows)})
    assert design(queries).final_states(conn) == [
        {"id": 1, "tenant_id": 7, "status": "done", "attempts": 1, "last_error": None, "lease_expired": None},
        # a status the map leaves out is passed through: the properties say unknown
        {"id": 2, "tenant_id": 8, "status": "lost", "attempts": 0, "last_error": None, "lease_expired": True}]
    assert conn.sent[0][1] == {"stale": True}  # only what the statement names


def test_pending_reset_and_no_accepted_finishes_without_their_statement(queries):
    d = design(queries)
    conn = Conn({"select count": ("count", [(3,)])})
    assert d.pending(conn) == 3 and conn.sent[0][1] == {"queue": "q1"}
    d.reset(conn)
    assert conn.sent[-1] == ("truncate q;", None)
    assert d.accepted_finishes(conn) is None  # no accepted_finishes statement: cannot tell
    with pytest.raises(NotImplementedError):
        DeclaredDesign().reset(conn)


def test_accepted_finishes_one_row_a_finish_or_the_adapters_reader(queries, tmp_path):
    (tmp_path / "q.sql").write_text(STATEMENTS + "\n-- name: accepted_finishes\nselect * from finishes;\n")
    with_finishes = sqlfile.load(str(tmp_path / "q.py"), "q.sql", "accepted_finishes")
    columns = "id outcome what at attempt recorded clock"
    conn = Conn({"select *": (columns, [(1, "failure", "e1", None, 1, "r1", "worker"),
                                        (1, "success", "ok", None, 2, "r1", None),
                                        (2, None, None, None, None, "r2", None)])})
    assert design(with_finishes).accepted_finishes(conn) == {
        1: {"finishes": [{"outcome": "failure", "what": "e1", "at": None, "attempt": 1, "clock": "worker"},
                         {"outcome": "success", "what": "ok", "at": None, "attempt": 2}],
            "recorded": "r1", "complete": True},
        2: {"finishes": [], "recorded": "r2", "complete": True}}
    reader = design(with_finishes, FINISHES=staticmethod(lambda rows: {r["id"]: len(rows) for r in rows}))
    assert reader.accepted_finishes(conn) == {1: 3, 2: 3}


def test_the_admin_dsn_keeps_the_password():
    conn = SimpleNamespace(info=SimpleNamespace(dsn="host=h port=5 user=u dbname=d", password="p w"))
    given = {"host": "h", "port": "5", "user": "u", "dbname": "d"}
    assert conninfo.conninfo_to_dict(declared.admin_dsn(conn)) == {**given, "password": "p w"}
    conn.info.password = None
    assert conninfo.conninfo_to_dict(declared.admin_dsn(conn)) == given


def test_ready_opens_the_pool_only_where_the_body_runs():
    class Ctx:
        pool, budget = None, 1

        def may_dequeue(self):
            return self.budget > 0

        def open_pool(self):
            self.pool = "open"

    ctx, design_ = Ctx(), HostedDesign()
    assert design_.ready(ctx) and ctx.pool == "open"
    ctx = Ctx()
    design_.pool_first = False  # the body runs elsewhere (a pool child, a client)
    assert design_.ready(ctx) and ctx.pool is None
    ctx.budget = 0
    assert not HostedDesign().ready(ctx) and ctx.pool is None


def test_the_contract_reads_its_clients_rows_as_the_adapters_do(monkeypatch):
    d = object.__new__(ContractDesign)
    d._descriptor = {"sql": {"final_states": "final", "accepted_finishes": "accepted"},
                     "finish_history": "last", "status": {"active": "running"}}
    d.schedule = Schedule(jobs=(JobSpec(1, tenant=3),))
    monkeypatch.setattr(hosted, "schedule_ids", lambda conn: {"a1": 1})

    class Client:
        def execute(self, query):
            return {"final": [("a1", "active", 2, "boom", True), ("zz", "active", 1, None, None)],
                    "accepted": [("a1", "failure", "failed", None, 1, "row")]}[query]

    assert d.final_states(Client()) == [{"id": 1, "tenant_id": 3, "status": "running", "attempts": 2,
                                         "last_error": "boom", "lease_expired": True}]
    failure = {"outcome": "failure", "what": "failed", "at": None, "attempt": 1}
    assert d.accepted_finishes(Client()) == {1: {"finishes": [failure], "recorded": "row", "complete": False}}


def test_a_contract_subclass_declares_its_script_and_runtime(monkeypatch):
    class Node(ContractDesign):
        SCRIPT = Path("/x/queue.js")

    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    assert object.__new__(Node).client() == ("/usr/bin/node", "/x/queue.js")
    assert object.__new__(ContractDesign).client() == ()  # the command option, then
    oban = pytest.importorskip("pg_job_chaos.adapters.oban")
    monkeypatch.setattr(oban, "python312", lambda: None)
    with pytest.raises(UsageError, match="oban-py needs Python 3.12"):
        object.__new__(oban.Oban).client()


ADAPTERS = {"procrastinate": "Procrastinate", "pgqueuer": "PgQueuer", "chancy": "Chancy", "awa": "Awa",
            "dbos": "Dbos", "django_tasks": "DjangoTasks"}


@pytest.mark.parametrize("module", sorted(ADAPTERS))
def test_every_python_adapter_is_a_declaration(module):
    """Each states its status map and its named SQL; each statement the declared design runs names only
    values the run's view gives (a KeyError at the end of a run otherwise)."""
    library = {"django_tasks": "django_tasks_db", "awa": "awa"}.get(module, module)
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed (pip install -e '.[libraries]')")
    cls = getattr(importlib.import_module(f"pg_job_chaos.adapters.{module}"), ADAPTERS[module])
    assert issubclass(cls, DeclaredDesign) and set(cls.STATUS.values()) <= set(STATES)
    view = cls().for_run(Schedule(jobs=(JobSpec(1),)))
    given = set(view.sql_params())
    for name in ("reset", "pending", "final_states", "accepted_finishes"):
        statement = declared.named(cls.SQL, name)
        assert statement is not None or name == "reset", f"{module}.sql has no {name}"
        if statement is not None and name != "reset":
            assert sqlfile.params(statement) <= given, (module, name, sqlfile.params(statement) - given)


def test_an_option_is_one_of_its_choices_or_a_whole_number():
    class Opts(HostedDesign):
        name = "opts"
        OPTIONS = {"mode": "a or b", "n": "how many"}

    assert (Opts().choice("mode", ("a", "b")), Opts(mode="b").choice("mode", ("a", "b"))) == ("a", "b")
    assert (Opts().whole("n", 5), Opts(n="3").whole("n", 5), Opts().whole("n")) == (5, 3, None)
    with pytest.raises(UsageError, match=r"design opts: mode='c'; one of a, b"):
        Opts(mode="c").choice("mode", ("a", "b"))
    with pytest.raises(UsageError, match=r"design opts: n='0'; a whole number of at least 1"):
        Opts(n="0").whole("n")


def test_the_contract_spec_lists_a_watched_statement_of_no_job():
    from pg_job_chaos.workers.hosted.contract import watch_list

    watch = {(2, "mid-work"), (None, "sql:21caf57f"), (1, "sql:21caf57f")}
    assert watch_list(watch) == [[None, "sql:21caf57f"], [1, "sql:21caf57f"], [2, "mid-work"]]
