"""The supervisor's main loop: one run of one schedule, from the first fork to the last reap.

Each wake-up (a write in the run directory, a worker's exit, or at the latest :data:`TICK`: see
``wake.py``): read new execution-log records (a ``point`` record may strike), forward
worker log lines, reap exits, run due timers, restart the dead and those that stopped by themselves
(each restart a new identity, within the restart budget: :meth:`Supervisor._exited`), sample
``pg_stat_activity``, and decide whether the run is over: quiescent, workers exhausted, stalled, or at
the deadline -- a wall-clock bound it enforces itself.
Quiescent: nothing pending and nothing in flight, either held for :data:`SETTLE_POLLS` poll intervals,
or -- sooner -- once every live worker has looked for work again, found none and swept since the last
record (its idle mark, ``core/idlemark.py``), and nothing is pending after that.
Then it kills what is left by process group. It never raises for anything a worker does. A worker may
be a standby forked during the run before (``standby.py``): this run arms the next run's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ...core import execlog, idlemark, logs
from ...core.cleanup import Cleanup
from ...core.events import EVENTS, WORKER_EXIT_REASONS, EndedBy, LogEvent, WorkerExitReason, misspelt
from ...core.history import TERMINAL_EVENTS
from ...core.schedule import Schedule
from ...core.server import Replicated, Restartable
from ...faults.catalogue import entries
from ...workers.body.execution import WorkerSpec
from ...workers.design import DesignRun
from ..janitor import Janitor
from ..net.network import Network
from ..postgres import pgbouncer
from . import process
from .admin import Admin
from .process import client_timeouts
from .result import SupervisorResult
from .server_state import ServerState
from .standby import Standby
from .strikes import Strikes
from .wake import Waker

log = logging.getLogger("pgjc.supervisor")

TICK = 0.01  # seconds: the longest wait between polls of the logs and the children (see wake.py)
SETTLE_POLLS = 2  # quiescence must hold this many poll intervals in a row
SAMPLES_PER_LEASE = 4  # pg_stat_activity samples per lease (see sample_every)
MIN_SAMPLE_EVERY = 0.02  # seconds: never sample faster than this
LOG_MERGE_EVERY = 0.1  # seconds between forwarding the workers' log lines (core/logs.py)
# After a restart fault, psycopg_pool retries a failed connection after 1, 2 and 4 s (its
# AttemptWithBackoff, jittered): a server still in crash recovery at the first retry costs a worker up
# to 7 s without a connection. No stall is declared that soon after the server started again (behind
# PgBouncer, add its server_login_retry: a worker waits that long if its first try after the restart failed).
POOL_RECOVERY = 8.0


class Supervisor:
    def __init__(self, schedule: Schedule, design: DesignRun, *, admin_dsn: str, worker_dsn: str,
                 run_dir: Path, janitor: Janitor | None = None, server: Restartable | None = None,
                 replica: Replicated | None = None, admin: Admin | None = None,
                 standby: Standby | None = None):
        """*server*, *replica*: the back end's capabilities the faults use (``Database.control``,
        ``Database.replica``). *admin*: a session of the caller's to use (kept open across runs: a
        connect less per run); None: one of the run's own, closed at its end. *standby*: the caller's
        workers forked ahead (``standby.py``): this run takes what fits it and arms it for the next."""
        self.s = schedule
        self.design = design
        self.lent_admin = admin
        self.standby = standby
        self._armed = False
        self._ending: tuple[float, list[process.WorkerProcess]] | None = None  # (when, whom) it killed
        self.admin_dsn = admin_dsn
        self.worker_dsn = worker_dsn
        self.run_dir = Path(run_dir)
        self.janitor = janitor
        self.server = server
        self.replica = replica
        self.server_state = ServerState()  # the server as the strikes leave it; the loop reads it
        self.uses_network = any(f.needs_network for f in entries(e.fault for e in schedule.events))
        self.net: Network | None = None
        self.declared = dict(design.handle.exit_outcomes)
        self.workers = dict[str, process.WorkerProcess]()
        self.records: list[dict] = []
        self.samples: list[dict] = []
        self.notes: list[str] = []
        self._restarts_due: list[tuple[float, int]] = []  # (when, slot)
        # each slot's next generation (a restart, a deploy's replacement: each takes one)
        self._generations: dict[int, int] = {}
        self._restarts_used = 0
        self._janitor_keys = dict[str, str]()
        self._unknown: set[str] = set()  # unknown events already warned of, as repr (_on_record)
        self.looked_again = LookedAgain(self.run_dir)  # the sooner end (below)
        self.next_sample = 0.0  # when to sample pg_stat_activity next
        self._sampled_a_job = False
        self.watch = frozenset((e.job, e.point) for e in schedule.events)
        delay = schedule.timing.restart_delay
        self.restart_delay = schedule.seconds(design.handle.default_restart_delay if delay is None else delay)
        self.poll = schedule.seconds(schedule.timing.poll)
        self.recovery = POOL_RECOVERY + (pgbouncer.SERVER_LOGIN_RETRY if schedule.pooler else 0.0)
        # The horizon property flags a transaction older than half a lease; sampling four times a
        # lease sees any that lasts three quarters of one, and costs the workers little CPU.
        self.sample_every = max(MIN_SAMPLE_EVERY, schedule.seconds(schedule.timing.lease) / SAMPLES_PER_LEASE)
        # A hosted library's recovery may act only every so often (workers/hosted/timing.py): the stall and
        # the deadline stretch by its longest period (article seconds; 0 for the built-in designs), and the
        # ratios of its documented defaults this schedule cannot keep are the run's first notes.
        self.extra = design.stall_extra()
        self.notes += design.timing_notes()

    def run(self, meanwhile: Callable[[list[dict]], object] | None = None) -> SupervisorResult:
        """Run the schedule to its end; always kills what it forked (a failing cleanup step after an error
        is logged; the first error is raised). *meanwhile(injected faults)*: the caller's reads of the
        final tables, once the workers are killed, while their processes are torn down (~2 ms each)."""
        t0 = time.monotonic()
        with Cleanup(log) as cleanup:
            if self.lent_admin is not None:
                admin = self.lent_admin
                admin.notes = self.notes  # what fails in this run is this run's note
            else:
                admin = Admin(self.admin_dsn, self.notes)
                cleanup.push("closing the admin session", admin.close)
            steps = {"admin": time.monotonic()}
            if self.uses_network:
                self.net = Network(self.worker_dsn, self.s.workers, self.janitor)
                cleanup.push("ending the network faults", self.net.close)
            self.strikes = Strikes(self.s, self.workers, admin, server=self.server, replica=self.replica,
                                   janitor=self.janitor, network=self.net, state=self.server_state,
                                   replace=self._replacement)
            tail = execlog.Tail(self.run_dir)
            merger = logs.Merger(self.run_dir)
            self.waker = Waker(self.run_dir)
            cleanup.push("closing the run directory's watch", self.waker.close)
            cleanup.push("forwarding the last worker log lines", lambda: merger.poll(final=True))
            cleanup.push("reading the last records", lambda: self._read(tail))
            cleanup.push("ending the workers", self._shutdown)
            for slot in range(1, self.s.workers + 1):
                self._spawn(slot)
            if self.standby is not None:  # no session but this run's own while it runs
                self.standby.release()
            steps["spawned"] = time.monotonic()
            ended_by = self._loop(t0, admin, tail, merger)
            steps["ended"] = time.monotonic()
            if self.standby is not None:  # nothing is sampled any more: the next run's may connect
                self._arm()
                self.samples = self.standby.run_over(self.samples, steps["ended"])
            self._end_workers()
            found = meanwhile(self.strikes.injected) if meanwhile is not None else None
        t1 = steps["shut"] = time.monotonic()
        log.info("run ended (%s) after %.2f s", ended_by, t1 - t0)
        return SupervisorResult(self.records, [w.ended for w in self.workers.values()], self.strikes.injected,
                                self.samples, ended_by, t0, t1, self.notes, steps, found)

    def _loop(self, t0: float, admin: Admin, tail: execlog.Tail, merger: logs.Merger) -> EndedBy:
        limit = self.s.timing.deadline + self.extra  # article seconds
        quiet = self.s.stall + self.extra  # article seconds
        deadline = t0 + self.s.seconds(limit)
        stall = self.s.seconds(quiet)
        next_merge = last_activity = t0
        # Not at t0 (no worker session yet, the queue full): the first job's start samples (_on_record)
        next_check = t0 + self.poll
        self.next_sample = t0 + self.sample_every
        quiet_since = None
        # A contract client's start (an interpreter and its imports: seconds on a loaded machine) is
        # neither activity nor a stall: the stall clock restarts after it and the deadline moves by it.
        starting_since: float | None = None
        startup = 0.0  # real seconds spent with a client starting
        while True:
            now = time.monotonic()
            if self._read(tail):
                last_activity = now
            if any(w.alive and w.client_starting for w in self.workers.values()):
                starting_since = now if starting_since is None else starting_since
                last_activity = now
            elif starting_since is not None:
                startup += now - starting_since
                starting_since = None
            if now >= next_merge:
                merger.poll()
                next_merge = now + LOG_MERGE_EVERY
            self._reap(now)
            self.strikes.run_due(now)
            self._restart_due(now)
            down = self.server_state.down  # a restart, a failover: nothing to sample, nothing is quiet
            if now >= self.next_sample and not down:
                self.samples += admin.sample(time.monotonic(), self.workers)  # when taken, not when woken
                self.next_sample = now + self.sample_every
            if now >= next_check and not down:
                next_check = now + self.poll
                quiet_since = (quiet_since or now) if self._quiet(admin) else None
                if quiet_since is not None and now - quiet_since >= SETTLE_POLLS * self.poll:
                    return EndedBy.QUIESCENT
            if not down and self.looked_again.over([w for w in self.workers.values() if w.alive],
                                                   lambda: self._quiet(admin)):
                return EndedBy.QUIESCENT
            if not down:
                for w in self.looked_again.sleepers([w for w in self.workers.values() if w.alive],
                                                    lambda: self._quiet(admin)):
                    w.wake()
            if (not any(w.alive for w in self.workers.values()) and not self._restarts_due
                    and not self.strikes.pending):
                return EndedBy.WORKERS_EXHAUSTED
            recovering = self.server_state.recovering(now, self.recovery)
            if now - last_activity >= stall and not self.strikes.pending and not recovering:
                self.notes.append(f"nothing happened for {quiet:g} article seconds{self._stretched()}")
                return EndedBy.STALLED
            # Each restart's recovery is the harness's doing, not the design's: it moves the deadline.
            moved = startup + (now - starting_since if starting_since is not None else 0.0)
            if now >= deadline + moved + self.server_state.deadline_extension(self.recovery):
                self.notes.append(f"deadline of {limit:g} article seconds reached{self._stretched()}")
                return EndedBy.DEADLINE
            self.waker.wait(TICK, [w.proc.sentinel for w in self.workers.values() if w.alive])

    def _stretched(self) -> str:
        return (f" ({self.extra:g} of them for {self.design.handle.name}'s recovery period)"
                if self.extra else "")

    # --- workers ------------------------------------------------------------------------------------
    def _spawn(self, slot: int, *, system_id: str | None = None) -> str:
        """Fork the slot's next generation (a new identity: its log, its lane); *system_id*: the identity it
        gives its system (None: the design's for its identity, ``DesignHandle.system_identity``; "": its own
        identity, named). Returns its identity."""
        generation = self._generations.get(slot, 0)
        self._generations[slot] = generation + 1
        identity = f"w{slot}.{generation}"
        if system_id == "":
            system_id = identity
        dsn = self.net.dsn_for(slot) if self.net is not None else self.worker_dsn
        spec = WorkerSpec(identity, self.s, client_timeouts(dsn), self.run_dir, self.watch,
                          tenant_setting=self.design.handle.tenant_setting, system_id=system_id or "")
        taken = self.standby.take(slot, spec, self.design.handle) if self.standby and not generation else None
        w, key = taken or (process.spawn(spec, self.design, slot=slot, generation=generation,
                                         close_fds=self._close_fds()), None)
        if key is None and self.janitor is not None:
            key = self.janitor.register("killpg", pgid=w.pid)
        if key is not None:
            self._janitor_keys[identity] = key
        # what its system sees it as: named, or the design's for its identity (the deploy reads it)
        w.system_id = system_id or self.design.handle.system_identity(identity)
        self.workers[identity] = w
        log.debug("started %s (pid %s)", identity, w.pid)
        return identity

    def _replacement(self, old: process.WorkerProcess, system_id: str) -> str:
        """A deploy's replacement of *old*: its slot's next generation, now (Strikes.start_replacement)."""
        return self._spawn(old.slot, system_id=system_id)

    def _close_fds(self) -> tuple[int, ...]:
        """What a forked child must not hold: the janitor's pipe, this run's network."""
        janitor = (self.janitor.fd,) if self.janitor is not None else ()
        return janitor + (self.net.fds if self.net is not None else ())

    def _arm(self) -> None:
        """Fork the next run's standbys, once (``standby.py``); not behind the fault proxy (nor its next)."""
        if self.standby is not None and not self._armed and self.net is None:
            self._armed = True
            self.standby.arm(self.design.handle, client_timeouts(self.worker_dsn), self.s, self._close_fds())

    def _reap(self, now: float) -> None:
        for w in self.workers.values():
            if w.reaped():
                self._exited(w, now, by_harness=False)

    def _exited(self, w: process.WorkerProcess, now: float, *, by_harness: bool) -> None:
        """Record *w*'s exit, and replace it unless the harness ended it or asked it to stop.

        Replaced, within the restart budget and after the restart delay (each replacement a new
        identity): a worker that died, and one that stopped by itself (``stopped-by-itself``: its
        ``run_worker`` returned with its dequeue budget not spent). The second is a choice: a production
        process manager may leave a clean exit down (systemd's ``Restart=on-failure``), but Kubernetes'
        default (``restartPolicy: Always``, the only one a Deployment takes) restarts any exit, and a
        worker left down would end the run with its jobs stranded for a reason that is ours, not the
        design's. So it is replaced, and the stop is said: in the history (the exit, with its log's last
        line), in the run's notes, in the timeline, and in ``progress`` / ``terminal-states`` when jobs
        were left. Not replaced: ``budget`` (our dequeue budget spent: we asked), a deploy's ``graceful``
        and ``killed-after-grace`` (issue 47: the deploy starts its replacement itself)."""
        # a deploy's worker may exit within the loop's pass that signalled it: never before its SIGTERM
        when = max(now, w.terminated_at) if w.terminated_at is not None else now
        x = w.record_exit(when, by_harness=by_harness, declared=self.declared, run_dir=self.run_dir)
        if self.janitor is not None and w.identity in self._janitor_keys:
            self.janitor.forget(self._janitor_keys.pop(w.identity))
        if by_harness:
            return
        log.info("%s ended: %s%s", w.identity, x.told(), f" during job {x.job}" if x.job else "")
        if x.outcome in WORKER_EXIT_REASONS and WorkerExitReason(x.outcome).asked:
            return
        if w.terminated_at is not None:  # a deploy's, ended otherwise in its grace: the deploy replaces it
            return
        stopped = x.outcome == WorkerExitReason.STOPPED_BY_ITSELF
        if self._restarts_used < self.s.restart_budget:
            self._restarts_used += 1
            self._restarts_due.append((now + self.restart_delay, w.slot))
            if stopped:
                self.notes.append(f"{w.identity} {x.told()}; replaced")
        else:
            said = f"{w.identity} {x.told()}" if stopped else w.identity
            self.notes.append(f"restart budget ({self.s.restart_budget}) spent; {said} not replaced")

    def _restart_due(self, now: float) -> None:
        for due in [d for d in self._restarts_due if d[0] <= now]:
            self._restarts_due.remove(due)
            self._spawn(due[1])

    def _end_workers(self) -> None:
        """Kill the live workers, end the strikes (a stopped server starts); :meth:`_shutdown` reaps."""
        if self._ending is None:
            now = time.monotonic()
            self._reap(now)  # what died by itself is not "ended by the harness"
            self._ending = (now, [w for w in self.workers.values() if w.alive])
            process.signal_all(self._ending[1])
            self.strikes.close()

    def _shutdown(self) -> None:
        self._end_workers()
        now, live = self._ending or (0.0, [])
        process.reap_all(live)
        for w in live:
            self._exited(w, now, by_harness=True)

    # --- the log ----------------------------------------------------------------------------------
    def _read(self, tail: execlog.Tail) -> bool:
        """New execution-log records into the history; True when there were any."""
        new = tail.poll()
        for r in new:
            self.records.append(r)
            self._on_record(r)
            self.looked_again.saw(r)
        return bool(new)

    def _on_record(self, r: dict) -> None:
        who = r.get("worker")
        w = self.workers.get(who) if isinstance(who, str) else None
        if w is None:
            return
        ev = r.get("event")
        if not isinstance(ev, str) or ev not in EVENTS:
            # a client's misspelling: said once, not passed over; a design's own event: passed over
            why = misspelt(ev)
            if why is not None and repr(ev) not in self._unknown:
                self._unknown.add(repr(ev))
                log.warning("%s wrote an execution-log record the history cannot read: %s", who, why)
            return
        if ev == LogEvent.CONTRACT_CLIENT:
            w.client_starting = True
        elif ev == LogEvent.CLIENT_START:
            w.client_starting = False
        elif ev == LogEvent.STARTED:
            if not self._sampled_a_job:  # the first job under way: sample at once
                self._sampled_a_job = True
                self.next_sample = 0.0
            w.current[r["job"]] = r.get("attempt")
            w.job_pids[r["job"]] = r.get("pid")
        elif ev in TERMINAL_EVENTS:
            if isinstance(job := r.get("job"), int):  # a record of no job leaves nothing in flight
                w.current.pop(job, None)
            if ev == LogEvent.FINISHED:  # past the workers' start: arming now costs their jobs least
                self._arm()
        elif ev == LogEvent.PROCESS_EXIT:  # the child a job ran in is gone (workers/hosted/spawned.py)
            for job in [j for j, pid in w.job_pids.items() if pid == r.get("exited")]:
                w.current.pop(job, None)
                w.job_pids.pop(job, None)
        elif ev == LogEvent.WORKER_ERROR:
            w.error = r.get("error")
        elif ev == LogEvent.POINT:
            self.strikes.at_point(w, r)

    def _quiet(self, admin: Admin) -> bool:
        # A worker a pause stopped and has not resumed: it may be between two of its design's statements,
        # holding no job the history knows of yet -- a claim half sent.
        if any(self.workers[w].alive for w in self.strikes.stopped if w in self.workers) or \
                any(w.alive and w.current for w in self.workers.values()):
            return False
        return admin.pending(self.design) == 0


# Records about a statement, not a step of a job or a worker: a job's statements come between its started
# and its end (in flight), a job-less one is part of a look for work (an idle mark follows it); the empty
# look after a job logs the claim once more under that job (workers/body/statements.py keeps the last job).
NOT_ACTIVITY = frozenset({LogEvent.STATEMENT, LogEvent.TENANT_STATEMENT})


class LookedAgain:
    """The sooner end of a run: every live worker has looked for work again since the last record.

    The supervisor's timed rule ends a run once nothing is pending and nothing is in flight for
    :data:`SETTLE_POLLS` poll intervals. :meth:`over` ends it as soon as every live worker's idle mark
    (``core/idlemark.py``: when its last look for work that found nothing began, written after that
    look's sweep) is newer than the newest execution-log record, nothing is in flight, and the design's
    pending count, asked after the marks were read, is 0. A worker that writes no mark (a hosted
    library's loop, a user's) keeps it from deciding: the timed rule alone ends such a run.
    :meth:`sleepers` names the workers asleep between two empty looks, for the supervisor to wake.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.last_record_t = float("-inf")  # the newest activity record's t (monotonic, any worker)
        self._own_t: dict[str, float] = {}  # each worker's newest activity record's t
        self._woken: object = None  # the newest activity the sleepers were last woken after
        self._tried: dict[str, float] | None = None  # the marks a pending query last found busy

    def saw(self, record: dict) -> None:
        """An execution-log record read: activity unless it is about a statement."""
        if record.get("event") not in NOT_ACTIVITY and isinstance(t := record.get("t"), float | int):
            self.last_record_t = max(self.last_record_t, float(t))
            if isinstance(who := record.get("worker"), str):
                self._own_t[who] = max(self._own_t.get(who, float("-inf")), float(t))

    def over(self, live: Iterable, quiet: Callable[[], bool]) -> bool:
        """Whether the run is over by the marks of *live* (the live workers); *quiet* is the
        supervisor's own check (nothing in flight, nothing stopped, nothing pending), asked once per
        new set of marks."""
        marks = {}
        for w in live:
            if w.current:
                return False
            mark = idlemark.read(self.run_dir, w.identity)
            if mark is None or mark <= self.last_record_t:
                return False
            marks[w.identity] = mark
        if not marks or marks == self._tried:
            return False
        self._tried = marks
        return quiet()

    def sleepers(self, live: Iterable, quiet: Callable[[], bool]) -> list:
        """The live workers to wake now: none unless no worker is in a job, each writes marks, some
        mark is older than the newest activity record and *quiet* (asked at most once per newest
        record) says the run is quiet; then those whose mark is older than that record but newer
        than their own last activity record -- between two looks, asleep."""
        marks = []
        for w in live:
            mark = idlemark.read(self.run_dir, w.identity)
            if w.current or mark is None:
                return []
            marks.append((w, mark))
        asleep = [w for w, m in marks if self._own_t.get(w.identity, float("-inf")) < m <= self.last_record_t]
        if not asleep or self._woken == self.last_record_t:
            return []
        self._woken = self.last_record_t
        return asleep if quiet() else []
