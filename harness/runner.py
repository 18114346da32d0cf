"""Run schedules against a provisioned database and return histories.

One :class:`Runner` per database: it keeps one admin connection, resets the queue between runs
(invoices untouched), installs each design's extra schema once, and turns a supervisor's result
plus the final tables into a :class:`~core.history.History`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple, cast

import psycopg

from ..core.cleanup import Cleanup
from ..core.db import one
from ..core.errors import UsageError
from ..core.events import LogEvent
from ..core.history import History
from ..core.schedule import Schedule
from ..faults.catalogue import entries
from ..workers.design import DesignHandle, DesignRun, key_of
from ..workers.hosted import finishes
from ..workers.hosted.own_connection import check_setting
from ..workers.interface import Origin
from ..workers.loading import load_design
from ..workers.tenant.modes import SETTING
from .postgres import Database, transitions
from .postgres import dataset as db
from .supervisor import Supervisor, leftovers
from .supervisor.admin import Admin
from .supervisor.process import CLIENT_TIMEOUTS
from .supervisor.standby import Standby

log = logging.getLogger("pgjc.runner")

# Run directories (execution logs, idle marks) in memory where there is a tmpfs: on this machine's
# ext4 /tmp, making one took ~1 ms of a ~70 ms fault-free example, and each worker's first write as much.
RUNS_BASE = leftovers.TEMP_ROOT / "pg-job-chaos"


class _Final(NamedTuple):
    """What :meth:`Runner._final` read: the jobs, what a hosted library accepted and why it could not
    say, job_runs, the transitions, and when it was done (monotonic)."""

    jobs: list
    accepted: list[dict] | None
    unread: str | None
    runs: list[dict]
    changes: list[dict]
    read: float


class Runner:
    """Runs schedules on *database*. *designs*: the handles the command built (``load_design``), found
    here by the spec and options a schedule names; a schedule naming another design has its handle
    built once, on first use, and kept for this runner's life."""

    def __init__(self, database: Database, designs: Iterable[DesignHandle] = (), runs_base: Path = RUNS_BASE):
        self.database = database
        self.runs_base = runs_base  # where each run's directory is made (a slot's: one its parent removes)
        self.slots = None  # harness.slots.Slots when the command line asked for --parallel
        self.admin = psycopg.connect(database.admin_dsn, autocommit=True)
        self._installed: set[str] = set()
        self._designs: dict[str, DesignHandle] = {d.key: d for d in designs}
        self._policy_setting = SETTING  # what the invoices' policy reads now
        self._bare_checked = False  # _check_bare passed, and only built-in designs ran since
        self.runs = 0
        self._supervisor_admin: Admin | None = None  # the supervisors' session, kept across runs
        leftovers.share_resource_tracker()  # before any worker is forked: see leftovers.py
        self.standby = Standby(database.janitor)  # the next run's workers forked ahead (standby.py)
        self.steps: dict[str, float] = {}  # the last run's steps (monotonic), for run.py bench --profile

    def close(self) -> None:
        """Close the admin session, the invoices' policy put back to what provisioning made it read
        (a design's own tenant setting changes it for its runs): the database is left as it was found,
        for whoever uses it next (another runner, a test)."""
        try:
            if self._policy_setting != SETTING and not self.admin.closed:
                db.tenant_policy(self.admin, SETTING)
                self._policy_setting = SETTING
        except psycopg.Error as exc:  # a server already gone: nothing to leave as it was
            log.warning("could not put the invoices' policy back to %s: %s", SETTING, exc)
        finally:
            self.standby.close()
            self.admin.close()
            self._close_supervisor_admin()

    def _supervisor_session(self) -> Admin:
        """The supervisors' own session (``pg_stat_activity`` samples, the quiescence checks, the
        terminate fault), opened once and lent to every run: a connect less per run."""
        if self._supervisor_admin is None:
            self._supervisor_admin = Admin(self.database.admin_dsn, [])
        return self._supervisor_admin

    def _close_supervisor_admin(self) -> None:
        if self._supervisor_admin is not None:
            self._supervisor_admin.close()
            self._supervisor_admin = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def handle(self, spec: str, options: Mapping[str, str] | None = None) -> DesignHandle:
        """The design *spec* with *options*: the handle given for them, else built once for this
        runner's life (a search's hundreds of runs build it once)."""
        key = key_of(spec, options)
        if key not in self._designs:
            self._designs[key] = load_design(spec, options)
        return self._designs[key]

    def design(self, schedule: Schedule) -> DesignHandle:
        """The schedule's design (:meth:`handle` of its spec and options)."""
        return self.handle(schedule.design, schedule.design_options)

    def prepare(self, schedule: Schedule, design: DesignHandle | None = None) -> DesignRun:
        """Reset the queue and enqueue the schedule's jobs. Returns the design bound to this run."""
        design = design or self.design(schedule)
        with self._own(design, "install"):
            if design.name not in self._installed:
                design.install(self.admin, worker_role=self.database.worker_role)
                self._installed.add(design.name)
        builtin = design.origin is Origin.BUILTIN
        if not design.hosted and not (self._bare_checked and builtin):
            self._check_bare(design)
        self._bare_checked = builtin  # a user's or a library's code may make tables
        db.reset(self.admin)
        if design.tenant_setting != self._policy_setting:  # a design's own tenant code sets another setting
            db.tenant_policy(self.admin, check_setting(design.tenant_setting))
            self._policy_setting = design.tenant_setting
        run = design.for_run(schedule)  # before the fork: the supervisor's process queries it too
        with self._own(design, "reset"):
            design.reset(run, self.admin)  # a hosted design empties its library's own tables
        with self._own(design, "enqueue"), self.admin.transaction():
            run.enqueue(self.admin)
        return run

    @contextlib.contextmanager
    def _own(self, design: DesignHandle, step: str):
        """Around a step of a user's design on the admin connection: an error of its on one of the
        harness's tables or its schema is a usage error naming the table and the fix
        (:func:`~harness.postgres.dataset.clash`); any other error goes on as it is."""
        try:
            yield
        except psycopg.Error as exc:
            if design.origin.ours:
                raise  # ours (a built-in's, a library adapter's): a bug of the harness's, not a user's clash
            error = db.clash(self.admin, exc, design.spec, step)
            if error is None:
                raise
            raise error from None

    def _check_bare(self, design: DesignHandle) -> None:
        """A design on the harness's queue names its tables bare (``jobs``, as the article does): a
        usage error when a table of the user's hides ours on the search_path (a user's design run on
        this database made a ``public.jobs``), before any of its statements could read or empty it."""
        hidden = db.shadowed(self.admin)
        if not hidden:
            return
        name, where = next(iter(hidden.items()))
        if where is None:
            path = one(self.admin.execute("show search_path"))[0]
            raise UsageError(f"design {design.spec} names the harness's table {name} bare, but this "
                             f"database's search_path ({path}) lacks the harness's schema {db.SCHEMA}: "
                             f"the connection string's options or the role (ALTER ROLE ... SET) set one of "
                             f"their own; leave it out")
        raise UsageError(
            f"design {design.spec} names the harness's table {name} bare (its queue, {db.SCHEMA}.{name}), "
            f"but on this database {name} is {where}.{name}, not the harness's: a design run here "
            f"before made it (or the server's template database had it). Run that design on a database "
            f"of its own (another command, or another session), or name its table otherwise")

    def stamp(self, schedule: Schedule, design: DesignHandle | None = None) -> Schedule:
        """*schedule* with where and how it runs recorded (server major version, pooler, the hosted
        library's version, the body's pool size: ``DesignHandle.pool_size``, what ``pool-hygiene``
        budgets by), as saved and replayed. Stamping a stamped schedule changes nothing."""
        if design is None:
            design = self.design(schedule)
        libraries = design.versions() or schedule.libraries
        replica = self.database.replica.mode if self.database.replica is not None else None
        return schedule.replace(pg_version=self.database.major, pooler=self.database.pooler,
                                libraries=libraries, pool_size=design.pool_size(schedule), replica=replica)

    def _worker_dsn(self, design: DesignHandle) -> str:
        """The workers' DSN: on the replicated back end, a design whose client takes one host (it declares
        ``one_host``: awa's sqlx "invalid port number", node-postgres's "Invalid URL" with a multi-host
        DSN, measured in issue 37) gets the endpoint that follows the primary instead."""
        pair = self.database.replica
        if pair is not None and design.one_host:
            return pair.one_host_dsn(self.database.worker_dsn)
        return self.database.worker_dsn

    def _final(self, run: DesignRun, design: DesignHandle, injected: list[dict]) -> _Final:
        """The run's final tables, read once its workers are killed (while they are torn down)."""
        if any(f.breaks_every_session for f in entries(i.get("fault") for i in injected)):
            # a restart broke the admin sessions too: the next run's supervisor opens its own again
            self._close_supervisor_admin()
            self.admin.close()
            self.admin = psycopg.connect(self.database.admin_dsn, autocommit=True)
        with self._own(design, "final_states"):
            jobs = run.final_states(self.admin)
        # what a hosted library itself accepted, from its own tables (None: a built-in design, or untold)
        accepted, unread = finishes.read(run, self.admin)
        runs = [dict(zip(("job_id", "worker", "attempt", "started", "finished"), r, strict=True))
                for r in self.admin.execute(db.Q.final_runs)]
        return _Final(jobs, accepted, unread, runs, transitions.read(self.admin), time.monotonic())

    def run(self, schedule: Schedule, *, design: DesignHandle | None = None) -> History:
        """Run *schedule* once from a fresh queue; the run ends by itself (see the supervisor). *design*:
        the handle of the schedule's design (a search gives the one it was given); without it, the
        handle of the schedule's spec and options (:meth:`design`)."""
        begin = time.monotonic()
        design = design or self.design(schedule)
        schedule = self.stamp(schedule, design)
        run = self.prepare(schedule, design)
        if self.database.replica is not None:  # rewound after a failover, caught up: lag only from a fault
            self.database.replica.settle()
        prepared = time.monotonic()
        self.runs += 1
        self.runs_base.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix=f"logs-{self.runs}-", dir=self.runs_base))
        janitor = self.database.janitor
        with Cleanup(log) as cleanup:
            # the run directory, and its workers' TMPDIR (made by them: leftovers.py), removed here
            for path in (run_dir, leftovers.run_tempdir(run_dir)):
                if janitor is not None:
                    key = janitor.register("rmtree", path=str(path))
                    cleanup.push("telling the janitor", functools.partial(janitor.forget, key))
                cleanup.push(f"removing {path}", functools.partial(shutil.rmtree, path, ignore_errors=True))
            result = Supervisor(schedule, run, admin_dsn=self.database.admin_dsn,
                                worker_dsn=self._worker_dsn(design), run_dir=run_dir, janitor=janitor,
                                server=self.database.control, replica=self.database.replica,
                                admin=self._supervisor_session(),
                                standby=self.standby).run(lambda injected: self._final(run, design, injected))
            jobs, accepted, unread, runs, changes, read = cast(_Final, result.meanwhile)
            self.steps = {"begin": begin, "prepared": prepared, **result.steps, "read": read}
        for r in runs:
            for k in ("started", "finished"):
                r[k] = r[k].isoformat() if r[k] is not None else None
        timeouts = [r for r in result.records if r.get("event") == LogEvent.POINT_TIMEOUT]
        notes = list(result.notes) + [
            f"{r['worker']} waited {schedule.timing.strike_wait:g} s at job {r.get('job')} {r.get('point')} "
            "for the supervisor and went on without it (a strike may be missing)"
            for r in timeouts] + ([unread] if unread else [])
        return History(
            schedule=schedule, design=design.name, tenant_mode=schedule.tenant_mode,
            records=result.records, jobs=jobs, runs=runs, exits=result.exits, injected=result.injected,
            samples=result.samples, ended_by=result.ended_by, t0=result.t0, t1=result.t1, notes=notes,
            server={**self.database.environment(), "client_timeouts": dict(CLIENT_TIMEOUTS)},
            expected_rows=db.expected_rows(j.tenant for j in schedule.jobs),
            hosted=design.hosted, finishes=accepted, clock=run.clock(), transitions=changes,
            tenant_cap=design.tenant_cap,
        )
