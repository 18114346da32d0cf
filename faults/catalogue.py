"""The catalogue itself. Job faults get the running execution (``workers.body.Execution``);
supervisor faults get the :class:`~faults.api.SupervisorAPI` the supervisor offers them."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import UsageError
from ..core.schedule import Event, Schedule
from . import supervisor
from .api import Stop, SupervisorAPI

EXIT_CRASH = 1


class InjectedError(Exception):
    """The ``raise`` fault: an ordinary Python exception from the job's code."""


@dataclass(frozen=True)
class Fault:
    name: str
    kind: str  # "job" or "supervisor"
    summary: str
    point: str | None = "mid-work"  # default strike point; None: the fault changes the work itself
    strike: Callable | None = None  # job faults: strike(execution) at the point
    work_lease_factor: float | None = None  # overrun/slow: work lasts this many leases
    inject: Callable[[SupervisorAPI, Event, Stop], None] | None = None  # supervisor faults


def _raise(ex) -> None:
    raise InjectedError(f"injected fault: raise at {ex.point_name}")


def _sql_error(ex) -> None:
    ex.conn.execute("select 1/0")


def _crash(ex) -> None:
    os._exit(EXIT_CRASH)  # no handler, no finally, no rollback: like a segfault or the OOM killer


def _hang(ex) -> None:
    # Alive and never finishing: only something outside (max runtime, the supervisor) ends it.
    # A lease-heartbeat worker's heartbeat thread keeps running meanwhile.
    while True:
        time.sleep(3600)


_FAULTS = [
    Fault("raise", "job", "the job raises a Python exception", strike=_raise),
    Fault("sql-error", "job", "the job runs select 1/0", strike=_sql_error),
    Fault("crash", "job", "the worker process ends with os._exit(1) mid-job", strike=_crash),
    Fault("hang", "job", "the job never finishes; the process stays alive", strike=_hang),
    Fault("overrun", "job", "the work lasts 1.5 leases", point=None, work_lease_factor=1.5),
    Fault("slow", "job", "the work lasts 0.75 of a lease", point=None, work_lease_factor=0.75),
    Fault("kill", "supervisor", "SIGKILL to the worker, like the OOM killer", inject=supervisor.kill),
    Fault("pause", "supervisor", "SIGSTOP for longer than the lease, then SIGCONT", inject=supervisor.pause),
    Fault("horizon", "supervisor", "another session holds a transaction (xid or REPEATABLE READ snapshot)",
          inject=supervisor.horizon),
    Fault("terminate", "supervisor", "pg_terminate_backend on the worker's session", inject=supervisor.terminate),
    Fault("latency", "supervisor", "the worker's traffic is delayed (0.05 s a chunk) for a while",
          inject=supervisor.latency),
    Fault("partition", "supervisor", "the worker's packets are dropped (nftables, no RST) for a while, then heal",
          inject=supervisor.partition),
    Fault("reset", "supervisor", "the worker's connections are cut with a TCP RST", inject=supervisor.reset),
    Fault("restart", "supervisor", "the server stops in immediate mode, starts again after a while "
          "(local server; durable settings)", inject=supervisor.restart),
]
CATALOGUE: dict[str, Fault] = {f.name: f for f in _FAULTS}


def known() -> str:
    return ", ".join(CATALOGUE)


def get(name: str, *, where: str = "fault") -> Fault:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise UsageError(f"unknown {where} {name!r}; known faults: {known()}") from None


def parse_faults(text: str) -> tuple[Fault, ...]:
    """``"crash,overrun"`` -> faults; an unknown name is a :class:`UsageError` listing the known ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    out = []
    for n in names:
        f = get(n)
        if f not in out:
            out.append(f)
    return tuple(out)


def check_schedule(s: Schedule, bad: Callable[[str], None]) -> None:
    """A :data:`core.schedule.Validator`: every fault a schedule names is in the catalogue, of its kind."""
    job_faults = ", ".join(n for n, x in CATALOGUE.items() if x.kind == "job")
    sup_faults = ", ".join(n for n, x in CATALOGUE.items() if x.kind == "supervisor")
    for i, j in enumerate(s.jobs):
        f = CATALOGUE.get(j.fault) if j.fault is not None else None
        if j.fault is not None and (f is None or f.kind != "job"):
            bad(f"jobs[{i}].fault: {j.fault!r} is not a job fault; job faults: {job_faults}")
    for i, e in enumerate(s.events):
        f = CATALOGUE.get(e.fault)
        if f is None or f.kind != "supervisor":
            bad(f"events[{i}].fault: {e.fault!r} is not a supervisor fault; supervisor faults: {sup_faults}")
