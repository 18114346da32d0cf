"""The catalogue itself. Job faults get the running execution (``workers.body.execution.Execution``);
supervisor faults get the :class:`~faults.api.SupervisorAPI` the supervisor offers them.

A supervisor fault's entry also declares what a run needs for it and how it strikes -- one slot,
durable settings, the local server, the network (and which action), root and nftables, its
variants, whether it strikes last -- and the harness reads those declarations, never the name.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..core.errors import UsageError
from ..core.schedule import Event, Schedule, declare_variants, is_statement_point
from . import failover, supervisor
from .api import NETWORK_ACTIONS, NetworkAction, Stop, SupervisorAPI

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
    # What a supervisor fault needs from the run, and how it strikes (read by the harness: the
    # supervisor, the runner, harness.session, the search's small-scope pass, the strategies).
    needs_one_slot: bool = False  # it reaches the whole server: no parallel slots (restart)
    needs_durable_settings: bool = False  # the server runs on DURABLE_SETTINGS: committed work survives it
    needs_local_server: bool = False  # the harness stops and starts the server: only the local one
    breaks_every_session: bool = False  # every session breaks, the runner's admin one too (restart)
    network: NetworkAction | None = None  # the SupervisorAPI network member it strikes with first (a proxy)
    needs_root_nftables: bool = False  # it drops packets with nftables: root and nft (partition)
    # the Event.variant values it takes, the first its events' default; empty: none (always xid)
    variants: tuple[str, ...] = ()
    strikes_last: bool = False  # among events due at one point it goes last: nothing runs after it (kill)
    # The small-scope pass strikes with it between a design's statements (pause: a worker stopped between
    # its read and its write while the others act is a check-then-act race); every supervisor fault may be
    # drawn at a statement point by the strategies.
    at_statements: bool = False
    # It ends or cuts the worker (crash, kill, terminate, reset, lost-commit-reply): the small-scope pass
    # strikes with it at every statement point -- before a statement, after its reply, before and after a
    # COMMIT (smallscope.cut_schedules); a job fault so marked may name a statement point (the wrapper,
    # in the worker, strikes it there: workers/body/statements.py).
    cuts_worker: bool = False
    # It fails the primary over to its standby: only on the replicated back end (ServerSpec.replica).
    needs_replica: bool = False
    # The small-scope pass strikes with it first at the design's recovery statements (a design's declared
    # recovery_statements, workers/design.py): what production does while recovery runs (restart, deploy).
    aims_at_recovery: bool = False
    # Its saved events may name a drawn position (xid, ...: VARIANTS, schedule formats 1-3) that
    # event_variant maps to its own; False for a fault that never drew at a position (deploy, format 4).
    takes_positions: bool = True

    def __post_init__(self):
        if self.network is not None and self.network not in NETWORK_ACTIONS:  # a bare string, misspelt
            raise ValueError(f"fault {self.name!r}: unknown network action {self.network!r}; "
                             f"known: {', '.join(NETWORK_ACTIONS)}")

    @property
    def needs_network(self) -> bool:
        """The run's workers connect through per-worker proxies (``harness.net``) for this fault."""
        return self.network is not None


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
    Fault("crash", "job", "the worker process ends with os._exit(1) mid-job", strike=_crash,
          cuts_worker=True),
    Fault("hang", "job", "the job never finishes; the process stays alive", strike=_hang),
    Fault("overrun", "job", "the work lasts 1.5 leases", point=None, work_lease_factor=1.5),
    Fault("slow", "job", "the work lasts 0.75 of a lease", point=None, work_lease_factor=0.75),
    Fault("kill", "supervisor", "SIGKILL to the worker, like the OOM killer", inject=supervisor.kill,
          strikes_last=True, cuts_worker=True),
    Fault("pause", "supervisor", "SIGSTOP for longer than the lease, then SIGCONT", inject=supervisor.pause,
          at_statements=True),
    Fault("horizon", "supervisor", "another session holds a transaction (xid or REPEATABLE READ snapshot)",
          inject=supervisor.horizon, variants=("xid", "repeatable-read")),
    Fault("terminate", "supervisor", "pg_terminate_backend on the worker's session",
          inject=supervisor.terminate, cuts_worker=True),
    Fault("latency", "supervisor", "the worker's traffic is delayed (0.05 s a chunk) for a while",
          inject=supervisor.latency, network=NetworkAction.LATENCY),
    Fault("partition", "supervisor",
          "the worker's packets are dropped (nftables, no RST) for a while, then heal",
          inject=supervisor.partition, network=NetworkAction.PARTITION, needs_root_nftables=True),
    Fault("reset", "supervisor", "the worker's connections are cut with a TCP RST", inject=supervisor.reset,
          network=NetworkAction.RESET, cuts_worker=True),
    Fault("lost-commit-reply", "supervisor",
          "the worker's next commit (its finish) commits, its reply is lost "
          "and the connection cut with a TCP RST", point="before-finish", inject=supervisor.lost_commit_reply,
          network=NetworkAction.LOSE_COMMIT_REPLY, cuts_worker=True),
    Fault("restart", "supervisor", "the server stops in immediate mode, starts again after a while "
          "(local server; durable settings)", inject=supervisor.restart, needs_one_slot=True,
          needs_durable_settings=True, needs_local_server=True, breaks_every_session=True,
          aims_at_recovery=True),
    # issue 47: SIGTERM, the worker's own graceful path within the grace, SIGKILL after it, a replacement
    Fault("deploy", "supervisor", "SIGTERM to the worker (-all: every worker), SIGKILL after the grace "
          "(--grace), a replacement: rolling (at once, a new identity), same-identity (at once, the old "
          "worker's), drain (once it has exited)", inject=supervisor.deploy,
          variants=supervisor.DEPLOY_VARIANTS, aims_at_recovery=True, takes_positions=False),
    # faults/failover.py: the replicated back end's primary fails over (--replica async|sync)
    Fault("failover", "supervisor", "the standby's WAL receiver is cut, the primary stops in immediate mode "
          "a while later and the standby is promoted (lagging); or a clean switchover; or the standby "
          "promoted with the old primary left up read-only, its sessions open (demote-in-place) (--replica)",
          inject=failover.failover, variants=("lagging", "switchover", "demote-in-place"),
          needs_one_slot=True, needs_replica=True, breaks_every_session=True),
    Fault("failover-cancel", "supervisor", "failover of a lagging standby, every commit waiting for it "
          "cancelled meanwhile (--replica sync: acknowledged with a warning)", inject=failover.failover,
          needs_one_slot=True, needs_replica=True, breaks_every_session=True),
]
CATALOGUE: dict[str, Fault] = {f.name: f for f in _FAULTS}
# An Event of a fault with variants defaults to the first (core/schedule.py cannot import this layer).
declare_variants({f.name: f.variants for f in _FAULTS if f.variants})
# What the strategies draw an event's variant from: a position, named by the first fault that takes
# variants (horizon's xid and repeatable-read: kept so that old seeds draw the schedules they drew); a
# fault with variants of its own takes its own at the drawn position (event_variant). A fault with more
# variants than that (deploy) has its own drawn (properties/strategies.py: an extra draw for its events
# only, so that the draws of schedules without it stay as they were).
VARIANTS: tuple[str, ...] = next(f.variants for f in _FAULTS if f.variants)


def draws_own_variant(fault: str) -> bool:
    """Whether an event of *fault* draws its variant among its own (more than :data:`VARIANTS` holds),
    not at the position drawn for every event (:func:`event_variant`)."""
    f = CATALOGUE.get(fault)
    return f is not None and len(f.variants) > len(VARIANTS)


def known() -> str:
    return ", ".join(CATALOGUE)


def get(name: str, *, where: str = "fault") -> Fault:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise UsageError(f"unknown {where} {name!r}; known faults: {known()}") from None


def entries(faults: Iterable[str | Fault | None]) -> tuple[Fault, ...]:
    """The catalogue entries of *faults* (names or entries); a name the catalogue lacks is left out
    (an injected record's ``resume`` or ``healed``, an unchecked schedule's typo), and so is None
    (a record that names no fault)."""
    out = []
    for f in faults:
        entry = f if isinstance(f, Fault) else CATALOGUE.get(f) if f is not None else None
        if entry is not None:
            out.append(entry)
    return tuple(out)


def event_variant(fault: str, variant: str) -> str:
    """The variant an event of *fault* carries: *variant* when the fault takes it; the fault's own at
    *variant*'s position in :data:`VARIANTS` (a drawn one) when it takes others; else ``xid`` (the
    :class:`~core.schedule.Event` default of a fault without variants)."""
    f = CATALOGUE.get(fault)
    if f is None or not f.variants:
        return "xid"
    if variant in f.variants:
        return variant
    return f.variants[VARIANTS.index(variant) % len(f.variants)] if variant in VARIANTS else "xid"


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
        if f is not None and is_statement_point(j.point) and not f.cuts_worker:
            cut = ", ".join(n for n, x in CATALOGUE.items() if x.kind == "job" and x.cuts_worker)
            bad(f"jobs[{i}].point: {j.fault!r} strikes only at the body's points; "
                f"at a statement point: {cut}")
    for i, e in enumerate(s.events):
        f = CATALOGUE.get(e.fault)
        if f is None or f.kind != "supervisor":
            bad(f"events[{i}].fault: {e.fault!r} is not a supervisor fault; supervisor faults: {sup_faults}")
        # VARIANTS: a fault drawn at a position took them before (formats 1-3, failover included, which
        # draws its own since demote-in-place); deploy (format 4) never did
        elif e.variant not in (*(VARIANTS if f.takes_positions else ()), *f.variants):
            takes = dict.fromkeys((*VARIANTS, *f.variants)) if f.takes_positions else f.variants
            bad(f"events[{i}].variant: {e.variant!r}; {e.fault} takes {', '.join(repr(v) for v in takes)}")
