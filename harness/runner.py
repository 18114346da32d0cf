"""Run schedules against a provisioned database and return histories.

One :class:`Runner` per database: it keeps one admin connection, resets the queue between runs
(invoices untouched), installs each design's extra schema once, and turns a supervisor's result
plus the final tables into a :class:`~core.history.History`.
"""

from __future__ import annotations

import inspect
import json
import logging
import shutil
import tempfile
from pathlib import Path

import psycopg

from ..core.cleanup import Cleanup
from ..core.history import History
from ..core.schedule import Schedule
from ..faults.catalogue import entries
from ..workers import finishes, load_design
from ..workers.own_connection import check_setting
from .postgres import Database
from .postgres import dataset as db
from .supervisor import Supervisor
from .supervisor.loop import CLIENT_TIMEOUTS

log = logging.getLogger("pgjc.runner")

RUNS_BASE = Path(tempfile.gettempdir()) / "pg-job-chaos"


def install(design, conn, *, worker_role: str) -> None:
    """``design.install``: protocol v2 passes the worker role (its grants are the design's job); a
    version-1 plug-in's ``install(conn)`` gets the connection alone."""
    try:
        params = inspect.signature(design.install).parameters
    except (TypeError, ValueError):
        params = {}
    if "worker_role" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        design.install(conn, worker_role=worker_role)
    else:
        design.install(conn)


class Runner:
    def __init__(self, database: Database):
        self.database = database
        self.slots = None  # harness.slots.Slots when the command line asked for --parallel
        self.admin = psycopg.connect(database.admin_dsn, autocommit=True)
        self._installed: set[str] = set()
        self._designs: dict[str, object] = {}
        self._policy_setting = "app.tenant"  # what the invoices' policy reads now (schema.sql)
        self.runs = 0

    def close(self) -> None:
        self.admin.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def design(self, schedule: Schedule):
        """The schedule's design object, loaded once per (spec, options) for this runner's life: a
        search's hundreds of runs import and build it once (``for_run`` gives it each run's schedule)."""
        key = json.dumps([schedule.design, schedule.design_options], sort_keys=True)
        if key not in self._designs:
            self._designs[key] = load_design(schedule.design, schedule.design_options)
        return self._designs[key]

    def prepare(self, schedule: Schedule, design=None):
        """Reset the queue and enqueue the schedule's jobs. Returns the design object."""
        design = design or self.design(schedule)
        if design.name not in self._installed:
            install(design, self.admin, worker_role=self.database.worker_role)
            self._installed.add(design.name)
        db.reset(self.admin)
        setting = getattr(design, "tenant_setting", "app.tenant")
        if setting != self._policy_setting:  # a design's own tenant code sets another setting
            db.tenant_policy(self.admin, check_setting(setting))
            self._policy_setting = setting
        if hasattr(design, "for_run"):  # a hosted design: the schedule, before the fork
            design.for_run(schedule)
        if hasattr(design, "reset"):  # a hosted design empties its library's own tables
            design.reset(self.admin)
        with self.admin.transaction():
            design.enqueue(self.admin, schedule.jobs, max_attempts=schedule.max_attempts)
        return design

    def stamp(self, schedule: Schedule, design=None) -> Schedule:
        """*schedule* with where it runs recorded (server major version, pooler, the hosted library's
        version), as saved and replayed."""
        if design is None:
            design = self.design(schedule)
        versions = getattr(design, "versions", None)
        libraries = dict(versions()) if callable(versions) else schedule.libraries
        return schedule.replace(pg_version=self.database.major, pooler=self.database.pooler, libraries=libraries)

    def run(self, schedule: Schedule, *, design=None) -> History:
        """Run *schedule* once from a fresh queue; the run ends by itself (see the supervisor)."""
        design = design or self.design(schedule)
        schedule = self.stamp(schedule, design)
        design = self.prepare(schedule, design)
        self.runs += 1
        RUNS_BASE.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix=f"logs-{self.runs}-", dir=RUNS_BASE))
        janitor = self.database.janitor
        with Cleanup(log) as cleanup:
            if janitor is not None:
                key = janitor.register("rmtree", path=str(run_dir))
                cleanup.push("telling the janitor", lambda: janitor.forget(key))
            cleanup.push("removing the run directory", lambda: shutil.rmtree(run_dir, ignore_errors=True))
            result = Supervisor(schedule, design, admin_dsn=self.database.admin_dsn,
                                worker_dsn=self.database.worker_dsn, run_dir=run_dir, janitor=janitor,
                                server=self.database.control).run()
            if any(f.breaks_every_session for f in entries(i.get("fault") for i in result.injected)):
                # a restart broke the admin session too
                self.admin.close()
                self.admin = psycopg.connect(self.database.admin_dsn, autocommit=True)
            jobs = design.final_states(self.admin)
            # what a hosted library itself accepted, from its own tables (None: a built-in design, or untold)
            accepted, unread = finishes.read(design, self.admin)
            runs = [dict(zip(("job_id", "worker", "attempt", "started", "finished"), r, strict=True))
                    for r in self.admin.execute(db.Q.final_runs)]
        for r in runs:
            for k in ("started", "finished"):
                r[k] = r[k].isoformat() if r[k] is not None else None
        notes = list(result.notes) + [
            f"{r['worker']} waited {schedule.timing.strike_wait:g} s at job {r.get('job')} {r.get('point')} for "
            "the supervisor and went on without it (a strike may be missing)"
            for r in result.records if r.get("event") == "point-timeout"] + ([unread] if unread else [])
        return History(
            schedule=schedule.to_dict(), design=design.name, tenant_mode=schedule.tenant_mode,
            records=result.records, jobs=jobs, runs=runs, exits=result.exits, injected=result.injected,
            samples=result.samples, ended_by=result.ended_by, t0=result.t0, t1=result.t1, notes=notes,
            server={**self.database.environment(), "client_timeouts": dict(CLIENT_TIMEOUTS)},
            expected_rows=db.expected_rows(j.tenant for j in schedule.jobs),
            hosted=finishes.is_hosted(design), finishes=accepted,
        )
