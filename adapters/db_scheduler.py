"""db-scheduler (com.github.kagkarlsson:db-scheduler 16.7.1, Java, PgJDBC and HikariCP) hosted through the
worker contract.

The queue's code is db-scheduler's own, run by ``workers/clients/java`` (``pgjc.DbScheduler``) as its README
runs it (``docs/reference/contract.md`` for the contract; :mod:`workers.hosted.contract` for the harness's
side; :mod:`workers.hosted.jvm` builds the jar once and caches it): ``Scheduler.create(dataSource, task)``,
one ``Tasks.oneTime`` task, ``start()``. What it does, read from its source (tag v16.7.1, paths under
``db-scheduler/src/main/java/com/github/kagkarlsson/scheduler/``):

- the due-executor polls (``FetchCandidates``, the default strategy: up to 3 x threads due executions a
  fetch, a new fetch when 0.5 x threads are left) every ``pollingInterval``; each candidate is *picked* by
  an update fenced by its ``version`` (``jdbc/JdbcTaskRepository.java``), ``picked_by`` the scheduler's
  name, ``last_heartbeat`` now; 10 executor threads;
- while an execution runs, the housekeeper updates its ``last_heartbeat`` every ``heartbeatInterval``
  (``Scheduler.updateHeartbeats``); every 2 x ``heartbeatInterval`` it looks for picked executions whose
  heartbeat is older than ``heartbeatInterval x missedHeartbeatsLimit`` (``Scheduler.detectDeadExecutions``)
  and hands each to the task's ``DeadExecutionHandler``: a OneTimeTask's ``ReviveDeadExecution``
  reschedules it now, as a failure (``consecutive_failures + 1``) -- with no limit: a job that kills its
  worker every time is revived for ever;
- a completion deletes the row (``OnCompleteRemove``), a failure reschedules it (``OnFailureRetryLater``, 5
  min); both are fenced by ``version``, so a revived execution's stale worker cannot complete it.

The harness bounds retries with ``MaxRetriesFailureHandler(max_attempts - 1, OnFailureRetryLater(5 min))``
(db-scheduler's README; its OneTimeTask default retries for ever); its give-up deletes the row too.

**Time scale.** The schedule's lease is the time after which db-scheduler acts on an execution: a dead
execution's threshold, ``heartbeatInterval x missedHeartbeatsLimit`` (5 min x 6 = 30 min, its defaults).
Every other interval keeps its documented ratio to it, but the polling interval: 10 s is 1/180 of the
lease, a few milliseconds at the run's scales; it is held at 0.1 s at least (each worker polls at most ten
times a second), a ratio broken and reported, never raising the time scale.

Status mapping (``db-scheduler.sql``): a row not picked -> ``scheduled`` -> ``queued``; picked ->
``picked`` -> ``running``; a deleted row (a shadow table, kept by a row trigger on delete, as graphile's
adapter keeps its deleted jobs) -> ``removed`` -> ``done``, or ``stopped`` -> ``dead`` when the failure
handler gave it up (its ``maxRetriesExceededHandler`` marks the shadow row). Attempts: the row's
``consecutive_failures``, plus the one running or finished. ``lease_expired``: a picked execution whose
heartbeat is older than the run's dead-execution threshold. db-scheduler keeps no error text.
``accepted_finishes``: each removal in the shadow table (a success, or a failure when given up), dated on the
server's clock; retried failures and revivals leave only the row's counters (``finish_history`` ``last``).
"""

from __future__ import annotations

from ..workers.hosted import jvm, timing
from ..workers.hosted.contract import ContractDesign

TIMING = timing.Intervals("db-scheduler", anchors={"lease": "dead execution after"}, intervals=(
    # a recovery: a picked execution whose heartbeats stopped is revived once its last is this old
    timing.Interval("dead execution after", 1800.0, kind=timing.WAIT, recovery=True,
                    setting="heartbeatInterval x missedHeartbeatsLimit: 5 min x 6 (Scheduler.java:466-468)"),
    timing.Interval("heartbeat interval", 300.0,
                    setting="SchedulerBuilder.heartbeatInterval, 5 min (SchedulerBuilder.java:46)"),
    # not a setting: the housekeeper's period, set from the heartbeat interval
    timing.Interval("dead execution check", 600.0, recovery=True,
                    setting="2 x heartbeatInterval (Scheduler.java:103)"),
    timing.Interval("polling interval", 10.0, least=0.1, bound=None,
                    setting="pollingInterval, 10 s (SchedulerBuilder.java:45), 0.1 s at least"),
    timing.Interval("retry delay", 300.0, kind=timing.WAIT, recovery=True,
                    setting="OnFailureRetryLater(5 min) (Tasks.java:25)"),
    timing.Interval("shutdown max wait", 1800.0, kind=timing.WAIT,
                    setting="SchedulerBuilder.shutdownMaxWait, 30 min (SchedulerBuilder.java:49)"),
))


class DbScheduler(ContractDesign):
    """db-scheduler 16.7.1 through the contract (``workers/clients/java``: ``pgjc.DbScheduler``)."""

    name = library = "db-scheduler"
    TIMING = TIMING
    # Not an interval of db-scheduler's: below time scale 2 its heartbeat (1/6 lease: 83 ms at time scale
    # 0.5) is shorter than the pauses of a JVM starting beside others on a loaded 2-core machine, and
    # dead-execution detection revives live executions (measured: a fault-free search at 0.5 ran one job
    # twice on a live worker; at 2, 12 runs, none).
    min_time_scale = 2.0
    # SchedulerBuilder's executorThreads, 10 (SchedulerBuilder.java:61): up to 10 bodies at once per worker
    concurrency = 10
    # Its dead-execution detection, every scheduler's housekeeper: the query for picked executions whose
    # heartbeat is stale (JdbcTaskRepository.getDeadExecutions, :598-613) and ReviveDeadExecution's
    # reschedule of each (ExecutionOperations.reschedule -> JdbcTaskRepository.reschedule, the same update a
    # retried failure sends), by their digests (tests/unit/test_recovery_statements.py derives them).
    recovery_statements = ("0471581d", "05bbcbb5")
    OPTIONS: dict[str, str] = {}

    def stall_extra(self, schedule) -> float:
        """Article seconds the run's limits stretch by: one revival per attempt (a job whose every attempt
        kills its worker comes back each time its heartbeat is stale), each the dead-execution threshold
        and the housekeeper's period after it -- not the one longest recovery, or the run would end at
        its deadline with the job still picked (terminal-states violated by the harness's limit)."""
        v = TIMING.values(schedule)
        revive = v["dead execution after"] + v["dead execution check"]
        return max(super().stall_extra(schedule), schedule.max_attempts * revive / schedule.time_scale)

    def client(self) -> tuple[str, ...]:
        """The cached jar's ``db-scheduler`` command (a :class:`UsageError` without a JDK or Maven)."""
        return jvm.command("db-scheduler")
