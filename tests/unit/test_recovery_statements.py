"""Each hosted adapter's ``recovery_statements`` (issue 47, item 3) name statements its library sends.

A library's statement is a strike point named by a digest of its text (``workers/body/statements.py``
``name_of``; the contract clients digest alike). Each adapter declares its recovery statements as those
digests; here each is derived again from the library's own code at the pinned version -- the function
that builds or holds the statement's text, called as the library calls it, or the text read from its
source (the Go module, whose queries sqlc keeps as constants) -- and the adapter's declaration must be
exactly that set: a statement the library no longer sends (a new version's text) or a recovery left out
fails here. That each is a *recovery* statement is the docs' (``docs/reference/adapters.md``, "Recovery
statements"); that a struck one is seen and struck in a run is ``tests/chaos/test_recovery_strikes.py``'s.
No database: what needs another runtime (Node, Python 3.12, Go's module cache) is skipped without it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from pg_job_chaos.workers import load_design
from pg_job_chaos.workers.body.statements import PREFIX, name_of
from tests.hosted_runs import NODE_DIR, node_missing


def _name(text) -> str:
    """The strike point's name of *text* (a string or a psycopg composed statement), without ``sql:``."""
    point = name_of(text)
    assert point is not None and point.startswith(PREFIX), text
    return point[len(PREFIX):]


def _declared(design: str) -> set[str]:
    return set(load_design(design).recovery_statements)


def _procrastinate() -> set[str]:
    from procrastinate import sql

    # manager.py: get_stalled_jobs, retry_job (retry_job_by_id_async), prune_stalled_workers
    return {_name(sql.queries[q]) for q in ("select_stalled_jobs_by_heartbeat", "retry_job",
                                            "prune_stalled_workers")}


def _pgqueuer() -> set[str]:
    from pgqueuer.adapters.persistence.qb import QueryQueueBuilder

    out = set()
    # every shape build_dequeue_query renders: capacity-gated (fairness=per-tenant-entrypoint's
    # concurrency_limit=1) or not, budget-gated (max_concurrent_tasks set) or not
    for limit in (0, 1):
        for budget in (None, 2):
            q = QueryQueueBuilder().build_dequeue_query(
                batch_size=1, entrypoints=["pgjc"], concurrency_limits=[limit],
                queue_manager_id="00000000-0000-0000-0000-000000000000",  # type: ignore[arg-type]
                global_concurrency_limit=budget, heartbeat_timeout=timedelta(seconds=30))
            out.add(_name(q.sql))
    return out


def _chancy() -> set[str]:
    from chancy.plugins.recovery import Recovery

    from pg_job_chaos.adapters.chancy import PREFIX as CHANCY_PREFIX

    sent = []

    class Cursor:  # Recovery.recover's one statement, then it stops
        async def execute(self, query, *args):
            sent.append(query)
            raise LookupError("statement captured")

    class Worker:
        heartbeat_timeout = 90

    class Chancy:
        prefix = CHANCY_PREFIX

    with pytest.raises(LookupError):
        asyncio.run(Recovery.recover(Worker(), Chancy(), Cursor()))  # type: ignore[arg-type]
    return {_name(q) for q in sent}


def _dbos() -> set[str]:
    """``get_pending_workflows`` (launch recovery) and ``reenqueue_for_recovery`` of DBOS's own system
    database class, on an engine that is never connected: each statement compiled as SQLAlchemy's
    execution compiles it for psycopg (the ``dbos`` schema translated in, an ``IN`` of one executor id)."""
    from dbos._serialization import DefaultSerializer
    from dbos._sys_db import SystemDatabase

    from pg_job_chaos.adapters.dbos import APP, SCHEMA

    db = SystemDatabase.create(system_database_url="postgresql://pgjc@127.0.0.1:1/none", engine_kwargs={},
                               engine=None, schema=SCHEMA, serializer=DefaultSerializer(),
                               executor_id="w1", app_name=APP)
    engine = db.engine
    sent: list[str] = []

    class Result:
        rowcount = 0

        def fetchall(self):
            return []

    class Conn:
        def execute(self, stmt, *args, **kwargs):
            schemas = engine.get_execution_options().get("schema_translate_map")
            compiled = stmt.compile(dialect=engine.dialect, schema_translate_map=schemas,
                                    compile_kwargs={"render_postcompile": True})
            sent.append(engine.dialect.identifier_preparer._render_schema_translates(str(compiled), schemas))
            return Result()

    @contextlib.contextmanager
    def begin():
        yield Conn()

    db.engine = type("Engine", (), {"begin": staticmethod(begin), "dialect": engine.dialect})()
    db.get_pending_workflows("w1", "v1")  # _dbos.py launch: its own executor id, its version
    db.reenqueue_for_recovery("pgjc-1", ["w1"], "_dbos_internal_queue")  # _recovery.py: [executor_id]
    return {_name(s) for s in sent}


def _node(script: str) -> str:
    return subprocess.run([shutil.which("node") or "node", "-e", script], capture_output=True, text=True,
                          check=True, timeout=60, cwd=NODE_DIR).stdout


def _pgboss() -> set[str]:
    # boss.js:24 failJobsByTimeoutCommand = plans.locked(schema, plans.failJobsByTimeout(schema)), run by
    # expire()
    plans = NODE_DIR / "node_modules" / "pg-boss" / "src" / "plans.js"
    out = _node(f"const p = require({str(plans)!r}); "
                "process.stdout.write(p.locked('pgboss', p.failJobsByTimeout('pgboss')))")
    return {_name(out)}


def _graphile() -> set[str]:
    # dist/sql/resetLockedAt.js, called as main.js calls it (useNodeTime false, its default)
    js = NODE_DIR / "node_modules" / "graphile-worker" / "dist" / "sql" / "resetLockedAt.js"
    out = _node(f"const m = require({str(js)!r}); "
                "m.resetLockedAt({escapedWorkerSchema: '\"graphile_worker\"', "
                "workerSchema: 'graphile_worker', "
                "resolvedPreset: {worker: {preparedStatements: true, useNodeTime: false}}}, "
                "{withRetries: async (f) => f({query: async (q) => process.stdout.write(q.text)})});")
    return {_name(out)}


def _oban() -> set[str]:
    from pg_job_chaos.adapters.oban import python312

    python = python312()
    if python is None:
        pytest.skip("no Python 3.12 with oban (the oban client's runtime)")
    worker = Path(__file__).resolve().parents[2] / "adapters" / "python" / "oban-worker.py"
    prefix = re.search(r'^PREFIX = "(\w+)"', worker.read_text(), re.M)
    assert prefix is not None
    out = subprocess.run([python, "-c", "import sys; from oban._query import Query; "
                          f"sys.stdout.write(Query._load_file('rescue_jobs.sql', {prefix.group(1)!r}))"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return {_name(out)}


def _river() -> set[str]:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        pytest.skip("no go on PATH (River's client is built with it)")
    cache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True,
                           check=True).stdout.strip()
    src = (Path(cache) / "github.com" / "riverqueue" / "river" / "riverdriver" / "riverpgxv5@v0.51.2" /
           "internal" / "dbsqlc" / "river_job.sql.go")
    if not src.exists():
        pytest.skip(f"River's driver is not in the module cache: {src}")
    text = src.read_text()
    out = set()
    for const in ("jobGetStuck", "jobRescueMany"):
        m = re.search(rf"^const {const} = `(.*?)`", text, re.S | re.M)
        assert m is not None, const
        # sqlctemplate: the schema template left empty, as for the client's unqualified (search_path) schema
        out.add(_name(m.group(1).replace("/* TEMPLATE: schema */", "")))
    return out


def _db_scheduler() -> set[str]:
    """db-scheduler's dead-execution detection, as its own JdbcTaskRepository builds the text
    (``java/DbSchedulerRecovery.java``, run against the Java client's jar, which bundles db-scheduler)."""
    from pg_job_chaos.workers.hosted import jvm

    if (why := jvm.missing()) is not None:
        pytest.skip(why)
    source = Path(__file__).parent / "java" / "DbSchedulerRecovery.java"
    out = subprocess.run([shutil.which("java") or "java", "-cp", str(jvm.jar()), str(source)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return {_name(line) for line in out.splitlines() if line.strip()}


PYTHON = {"procrastinate": _procrastinate, "pgqueuer": _pgqueuer, "chancy": _chancy, "dbos": _dbos}


@pytest.mark.parametrize("design", sorted(PYTHON))
def test_a_python_librarys_declared_recovery_statements_are_the_ones_its_code_builds(design):
    pytest.importorskip(design, reason=f"{design} is not installed (pip install -e '.[libraries]')")
    assert _declared(design) == PYTHON[design]()


@pytest.mark.parametrize("design", ["pg-boss", "graphile-worker"])
def test_a_node_librarys_declared_recovery_statements_are_the_ones_its_code_builds(design):
    if (why := node_missing()) is not None:
        pytest.skip(why)
    assert _declared(design) == {"pg-boss": _pgboss, "graphile-worker": _graphile}[design]()


def test_obans_declared_recovery_statement_is_its_lifelines_rescue():
    assert _declared("oban") == _oban()


def test_rivers_declared_recovery_statements_are_its_rescuers():
    assert _declared("river") == _river()


def test_db_schedulers_declared_recovery_statements_are_its_dead_execution_detection():
    declared = _declared("db-scheduler")
    assert len(declared) == 2 and declared == _db_scheduler()


def test_the_queues_that_declare_none_say_why():
    """awa's queries run in its Rust runtime (never through psycopg: no strike point to name);
    django-tasks-db has no recovery (a task left RUNNING stays so, its #46)."""
    for design in ("awa", "django-tasks-db"):
        assert load_design(design).recovery_statements == ()
