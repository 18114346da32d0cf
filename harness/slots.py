"""Parallel examples: N slots, each a database of its own on the same server, each driven by a
process of its own, so N schedules run at once. Examples are mostly waiting (leases, pauses,
polls), so even a 2-core machine runs several at a time.

Each slot's database is cloned once from the provisioned one (``CREATE DATABASE ... TEMPLATE``:
the 103,707 invoices are copied, not rebuilt), registered with the janitor, and dropped at the
end. Each slot process is forked before any thread exists, dies with us (``PR_SET_PDEATHSIG``),
keeps one :class:`~harness.runner.Runner` with the command's design handles (inherited by the fork:
a slot builds no design it was given), and answers schedules with histories over a pipe.

Where it applies: a batch of schedules known in advance -- the small-scope pass, the examples
after the first failure, compare's cross-replays. Hypothesis generates and shrinks one example at
a time, so that part stays sequential. A fault that reaches the whole server (a restart) must not
run beside other examples: such a search runs with one slot.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from pathlib import Path

from psycopg import sql

from ..core import procs
from ..core.cleanup import Cleanup
from ..core.errors import HarnessError, UsageError
from ..core.history import History
from ..core.schedule import Schedule
from ..workers.design import DesignHandle
from .postgres import Database, dataset
from .postgres import dsn as dsn_backend
from .supervisor import leftovers

MAX_SLOTS = 8
_FORK = multiprocessing.get_context("fork")


def default_slots() -> int:
    """Twice the cores, at most :data:`MAX_SLOTS`: the slots mostly wait."""
    return max(1, min(MAX_SLOTS, 2 * (os.cpu_count() or 1)))


def _serve(conn: Connection, database: Database, parent: int, designs: Sequence[DesignHandle],
           runs_base: Path) -> None:
    """A slot process: run each schedule it is sent, answer with the history (or the error)."""
    code = 0
    try:
        if not procs.die_with_parent(signal.SIGKILL, parent):
            os._exit(1)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from .runner import Runner

        with Runner(database, designs, runs_base=runs_base) as runner:
            while True:
                msg = conn.recv()
                if msg is None:
                    break
                try:
                    conn.send(("ok", runner.run(Schedule.from_dict(json.loads(msg))).to_dict()))
                except UsageError as exc:  # the user's (a design's clash with our tables): as it is
                    conn.send(("usage", str(exc)))
                except Exception as exc:  # the parent turns it into a HarnessError
                    conn.send(("error", f"{type(exc).__name__}: {exc}"))
    except (EOFError, KeyboardInterrupt):
        pass
    except BaseException:
        code = 1
    finally:
        os._exit(code)


class Slots:
    """``with Slots(database, n) as slots: slots.run_many(schedules)``. Create it before any other
    connection to *database* is open: a template database must have no sessions while it is copied."""

    def __init__(self, database: Database, n: int, designs: Sequence[DesignHandle] = ()):
        self.database = database
        self.n = n
        self.designs = tuple(designs)
        self._cleanup = Cleanup()
        self._conns: list[Connection] = []
        self._procs: list[multiprocessing.process.BaseProcess] = []
        self._hurry = False  # leaving on an error: do not wait for a slot to finish its run

    def __enter__(self) -> Slots:
        try:
            for k in range(self.n):
                self._start(k, self._clone(k))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _clone(self, k: int) -> Database:
        d = self.database
        name = f"{d.database}_s{k}_{secrets.token_hex(2)}"
        base = dsn_backend.with_db(d.admin_dsn, dbname="postgres")
        janitor = d.janitor
        if janitor is not None:
            key = janitor.register("dropdb", dsn=base, database=name, role=None)
            self._cleanup.push(f"telling the janitor about {name}", lambda: janitor.forget(key))
        self._cleanup.push(f"dropping slot database {name}",
                           lambda: dsn_backend.drop_database(base, name, None))
        with dsn_backend.connect_admin(base) as conn:
            try:
                conn.execute(sql.SQL("create database {} template {}").format(
                    sql.Identifier(name), sql.Identifier(d.database)))
            except Exception as exc:
                raise HarnessError(f"cannot clone the database for slot {k}: {exc}") from None
            conn.execute(sql.SQL("grant connect on database {} to {}").format(
                sql.Identifier(name), sql.Identifier(d.worker_role)))
            dataset.set_search_path(conn, name)  # a clone does not inherit its template's
        return replace(d, admin_dsn=dsn_backend.with_db(d.admin_dsn, dbname=name),
                       worker_dsn=dsn_backend.with_db(d.worker_dsn, dbname=name), database=name)

    def _start(self, k: int, database: Database) -> None:
        # The slot's run directories go under one of the parent's: a slot killed mid-run (the harness
        # interrupted or killed) never reaches its runner's cleanup, and left them in RUNS_BASE.
        from .runner import RUNS_BASE

        RUNS_BASE.mkdir(parents=True, exist_ok=True)
        runs_base = Path(tempfile.mkdtemp(prefix=f"slot-{os.getpid()}-{k}-", dir=RUNS_BASE))
        janitor = self.database.janitor
        if janitor is not None:
            key = janitor.register("rmtree", path=str(runs_base))
            self._cleanup.push(f"telling the janitor about slot {k}'s runs", lambda: janitor.forget(key))
        self._cleanup.push(f"removing slot {k}'s runs", lambda: shutil.rmtree(runs_base, ignore_errors=True))
        ours, theirs = _FORK.Pipe()
        p = _FORK.Process(target=_serve, args=(theirs, database, os.getpid(), self.designs, runs_base),
                          name=f"slot-{k}", daemon=False)
        p.start()
        theirs.close()
        self._conns.append(ours)
        self._procs.append(p)
        self._cleanup.push(f"ending slot {k}", lambda: self._stop(ours, p, runs_base))

    def _stop(self, conn: Connection, p, runs_base: Path) -> None:
        # Killing a slot mid-run is safe: its workers die with it (PR_SET_PDEATHSIG), and the
        # janitor still holds their process groups.
        try:
            conn.send(None)
        except OSError:
            pass
        p.join(0 if self._hurry else 30)
        if p.exitcode is None:
            p.kill()
            p.join(10)
        conn.close()
        # a slot killed mid-run never reached its runner's cleanup: its runs' temp directories, which are
        # not under its runs base (leftovers.run_tempdir), go here; the runs base with the cleanup's next step
        for run_dir in runs_base.glob("logs-*"):
            shutil.rmtree(leftovers.run_tempdir(run_dir), ignore_errors=True)

    def __exit__(self, *exc) -> bool:
        self._hurry = exc[0] is not None
        return self._cleanup.__exit__(*exc)

    def run_many(self, schedules: Sequence[Schedule]) -> list[History]:
        """Run every schedule on some slot, as many at once as there are slots; histories in order."""
        out: dict[int, History] = {}  # index of the schedule -> its history
        todo = list(enumerate(schedules))
        busy: dict[int, int] = {}  # slot -> index of the schedule it runs
        while todo or busy:
            for slot in range(self.n):
                if slot not in busy and todo:
                    i, s = todo.pop(0)
                    self._conns[slot].send(s.to_json())
                    busy[slot] = i
            for ready in wait([self._conns[s] for s in busy]):
                slot = next(s for s in busy if self._conns[s] is ready)
                conn = self._conns[slot]
                try:
                    status, payload = conn.recv()
                except EOFError:
                    raise HarnessError(f"slot {slot} died (exit {self._procs[slot].exitcode})") from None
                if status == "usage":
                    raise UsageError(payload)
                if status != "ok":
                    raise HarnessError(f"slot {slot} could not run a schedule: {payload}")
                out[busy.pop(slot)] = History.from_dict(payload)
        return [out[i] for i in range(len(schedules))]
