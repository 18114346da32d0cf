"""River (riverqueue/river v0.51.2, Go, the pgx v5 driver riverpgxv5) hosted through the worker contract.

The queue's code is River's own, run by ``workers/clients/go/cmd/river`` as its docs run it
(``docs/reference/contract.md`` for the contract; :mod:`workers.hosted.contract` for the harness's side;
:mod:`workers.hosted.golang` builds the binary once and caches it). What River does, read from its source
(v0.51.2):

- the producer fetches up to ``MaxWorkers`` jobs at once with ``FOR UPDATE SKIP LOCKED`` and raises
  ``attempt`` by one at each fetch (riverpgxv5 ``JobGetAvailable``): ``job.Attempt`` is the attempt the
  body is told; it fetches on LISTEN/NOTIFY and every ``FetchPollInterval``;
- ``JobTimeout`` cancels the job's context (``internal/jobexecutor/job_executor.go``
  ``context.WithTimeout``); the body's statements run under it, so a body past it fails at its next
  statement (the finish), and River retries the job (``attempt^4`` s, its default retry policy);
- the leader (``internal/leadership/elector.go``: one ``river_leader`` row, a TTL of the elect interval
  plus 10 s) runs the maintenance services: the rescuer (``internal/maintenance/job_rescuer.go``, every
  30 s, fixed) retries -- or discards, attempts spent -- a job ``running`` longer than
  ``RescueStuckJobsAfter``: how a job of a worker that died comes back. No heartbeat;
- a completion (the completer's ``JobSetStateIfRunningMany``, riverpgxv5
  ``internal/dbsqlc/river_job.sql:643-722``) matches ``state = 'running'``, not the attempt (``:708``): a
  stale execution's completion can finish its retry's job. It returns the row whether it updated it or not
  (``:711-722``), so ``JobCompleteTx`` of a job no longer running returns no error and the body's transaction
  commits without River's completion.

``--design-option finish=transaction``: ``river.JobCompleteTx`` (``job_complete_tx.go``) in the body's
finishing transaction after its ``job_runs`` insert, so both commit together; the default, ``work``,
lets River's completer mark the job after ``Work`` returns, in a transaction of its own.

**Time scale.** The schedule's lease is River's ``JobTimeout`` (1 minute documented): the time after which
River acts on a live job. Every other interval keeps its documented ratio to it: ``RescueStuckJobsAfter``
60 leases, ``FetchCooldown`` 1/600 lease (1 ms at least). ``FetchPollInterval`` stays at its 1 s (TIMING
says why). The batch completer's 50 ms flush (``internal/jobcompleter/job_completer.go:396``), the rescuer's
30 s, the scheduler's 5 s, the election's 5 s and the retry policy's ``attempt^4`` s are constants of
River's, not settings: they stay in real seconds at every time scale (the rescue's and the retry's stretch
the run's limits).

**What River accepted** (``accepted_finishes``, ``workers/clients/go/cmd/river/river.sql``). Every finish
River accepts is an UPDATE of a ``running`` ``river_job`` row: the completer's (and ``JobCompleteTx``'s)
``JobSetStateIfRunningMany`` and the rescuer's ``JobRescueMany`` (``river_job.sql:494-521``, also ``state =
'running'``); the other state changes River makes here are not finishes (its scheduler's ``retryable`` ->
``available``, its fetch's ``available`` -> ``running``), so after ``completed`` or ``discarded`` nothing more
is accepted. The row alone cannot say when River accepted each one: ``finalized_at`` is the worker's Go clock
when ``Work`` returned (``e.Time.Now()``, ``internal/jobexecutor/job_executor.go:476``), not the completer's
flush (every 50 ms, later under a pause or a cut connection), and only the last finish keeps it; an ``errors``
entry's ``at`` is the *start* of the execution that failed (``e.start``, ``job_executor.go:529-534``). So the
install adds ``pgjc_river_finish``, filled by a row trigger on each UPDATE that takes a job out of
``running``: the server's ``clock_timestamp()`` at it, the state set, and the appended error's ``attempt``
(the failing execution's own ``job.Attempt``; the rescuer's: the row's, ``job_rescuer.go:245-250``). Each row
is one finish -- ``completed`` a success, an appended error a ``failure`` -- except the rescuer's ("Stuck job
rescued by JobRescuer"): River's recovery of a running attempt, no execution's finish, so it is left out
(attributed to the last failed execution before it, it would judge a refused stale failure as accepted),
counted in the record's text. All are dated on the server's
clock at their UPDATE, and ``library-one-finish`` attributes each to the execution that returned last before
it with that outcome -- except a ``JobCompleteTx`` completion: its UPDATE runs inside the body's finishing
transaction, before that commit and the body's end, so it is undated and attributed by the ``pgjc.job_runs``
row the same transaction inserted (same ``xmin``); with no date, ``success-final`` cannot judge it (unknown on
``finish=transaction``). Not recorded, and not reachable here: ``JobSetStateInterrupted`` / ``Snoozed`` (an
attempt handed back without an error, only on ``StopAndCancel`` or a snooze, which the command never does); a
finish row would say ``requeued``.

Status mapping: ``available``, ``scheduled``, ``retryable``, ``pending`` -> ``queued``; ``running`` ->
``running``; ``completed`` -> ``done``; ``discarded``, ``cancelled`` -> ``dead``. ``lease_expired``: a
``running`` job past ``attempted_at + RescueStuckJobsAfter`` (the run's value, written into its metadata).
"""

from __future__ import annotations

from ..workers.hosted import golang, timing
from ..workers.hosted.contract import ContractDesign

TIMING = timing.Intervals("river", anchors={"lease": "job timeout"}, intervals=(
    timing.Interval("job timeout", 60.0, kind=timing.WAIT, setting="Config.JobTimeout (client.go:53)"),
    # a recovery: a job of a dead worker comes back when the rescuer finds it running this long
    timing.Interval("rescue stuck jobs after", 3600.0, kind=timing.WAIT, recovery=True,
                    setting="Config.RescueStuckJobsAfter (internal/maintenance/job_rescuer.go:30)"),
    # Held at its default, 1 s, at every scale (the adapter's choice, not River's): LISTEN/NOTIFY wakes
    # the producer at an insert, a retry made available and a rescue, so the poll is a fallback;
    # scaled, every worker would poll every few milliseconds (3 ms at time scale 0.2) and load the
    # machine until bodies outlive the JobTimeout. Reported, never raising the scale.
    timing.Interval("fetch poll interval", 1.0, grid=timing.FIXED, bound=None,
                    setting="Config.FetchPollInterval (client.go:49), kept at 1 s"),
    timing.Interval("fetch cooldown", 0.1, bound=None, setting="Config.FetchCooldown (client.go:46)"),
    # River's constants: the rescuer's period (and a dead leader's TTL before another runs it), and
    # the retry before a job's third attempt (16 s) with the scheduler's 5 s tick that makes it available
    timing.Interval("rescuer interval", 30.0 + 15.0 + 5.0, grid=timing.FIXED, recovery=True, bound=None,
                    setting="JobRescuerIntervalDefault 30 s + a dead leader's TTL 15 s + elect 5 s (fixed)"),
    timing.Interval("retry backoff", 16.0 + 5.0, grid=timing.FIXED, kind=timing.WAIT, recovery=True,
                    bound=None,
                    setting="DefaultClientRetryPolicy attempt^4 s + JobSchedulerInterval 5 s (fixed)"),
))


class River(ContractDesign):
    """River v0.51.2 in Go, through the contract (``workers/clients/go/cmd/river``)."""

    name = library = "river"
    TIMING = TIMING
    min_time_scale = TIMING.min_time_scale()
    # Its rescuer (internal/maintenance/job_rescuer.go:139-165, the leader's): JobGetStuck, then JobRescueMany
    # (riverpgxv5 internal/dbsqlc/river_job.sql.go:627, :1222), by their digests
    # (tests/unit/test_recovery_statements.py derives them).
    recovery_statements = ("0c711a76", "ae5c9b2d")
    # Queues{QueueDefault: {MaxWorkers: 100}}, the README's: up to 100 bodies at once per worker
    concurrency = 100
    OPTIONS = {"finish": "work (default: River's completer marks the job after Work returns) or "
                         "transaction (river.JobCompleteTx in the body's finishing transaction)"}

    def __init__(self, **options: str):
        super().__init__(**options)
        self.choice("finish", ("work", "transaction"))

    def stall_extra(self, schedule) -> float:
        """Article seconds the run's limits stretch by: one rescue per attempt (a job whose every
        attempt kills its worker comes back, then is discarded, by ``max_attempts`` rescues), each
        ``RescueStuckJobsAfter`` and the rescuer's period, a dead leader's TTL and election after it
        -- not the one longest recovery the other queues need, or the run would end at its deadline
        with the job still ``running`` (terminal-states violated by the harness's limit, not by River)."""
        v = TIMING.values(schedule)
        rescue = v["rescue stuck jobs after"] + v["rescuer interval"]
        return max(super().stall_extra(schedule), schedule.max_attempts * rescue / schedule.time_scale)

    def client(self) -> tuple[str, ...]:
        """The cached build of ``cmd/river`` (a :class:`UsageError` without Go)."""
        return (str(golang.command("river")),)
