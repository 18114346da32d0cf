"""pg-boss (timgit/pg-boss, npm ``pg-boss`` 10.4.2) hosted through the worker contract in Node.

The queue's code is pg-boss's own, run by ``adapters/node/pg-boss.js`` as its README configures it
(``docs/reference/contract.md`` for the contract; :mod:`workers.hosted.contract` for the harness's
side). What pg-boss does, read from its source (``src/``, 10.4.2):

- ``fetchNextJob`` (``plans.js``) claims with ``FOR UPDATE SKIP LOCKED``, sets ``state = 'active'`` and
  adds 1 to ``retry_count`` on every fetch after the first: the attempt the body is told is
  ``retryCount + 1``;
- the worker runs the handler under ``resolveWithinSeconds(.., expireInSeconds)`` (``manager.js``
  ``watch``): a handler past its expiration is failed -- retried while ``retry_count < retry_limit``
  -- and **not** stopped; its ``complete`` later matches ``state = 'active'`` (``completeJobs``), not
  the execution, so a stale completion can finish the retry's job;
- its maintenance (``supervise``, every ``maintenanceIntervalSeconds``, one instance at a time by
  ``trySetMaintenanceTime``) fails or retries an ``active`` job past ``started_on + expire_in``
  (``failJobsByTimeout``): how a job of a worker that died comes back. There is no heartbeat.

``--design-option finish=transaction``: pg-boss's ``complete(name, id, data, {db})`` (``manager.js``
``complete``: ``options.db || this.db``) with ``fetch()``, as its docs pair them -- the completion runs
on the body's connection in its finishing transaction, after the ``job_runs`` insert (the Node client's
``runJob(.., inFinish)``), so both commit together and ``after-insert`` lies after that commit; a count
other than 1 (the job is no longer ``active``) rolls the row back. The default, ``work``, is as above.

``--design-option fairness=per-tenant-singleton`` (issue 38; default ``off``): the queue's ``singleton``
policy (``types.d.ts`` ``QueuePolicy``; ``plans.js`` index ``job_i2``: one ``active`` job per
``singleton_key``), each job's ``singletonKey`` its tenant, the policy set by ``updateQueue`` at every
enqueue (``standard``, pg-boss's default, when off).

``--design-option batch_size=N`` (default 1, pg-boss's; the corpus's pg-boss #535 case): ``work(..,
{batchSize: N})``: one fetch activates up to N jobs, the handler runs them one after another, and pg-boss
completes the batch when it returns (fails every job of it when it throws: its batch semantics).

Status mapping: ``created``, ``retry`` -> ``queued``; ``active`` -> ``running``; ``completed`` -> ``done``;
``failed``, ``cancelled`` -> ``dead``. ``lease_expired``: an ``active`` job past ``started_on + expire_in``.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import UsageError
from ..workers.hosted import timing
from ..workers.hosted.contract import ContractDesign

TIMING = timing.Intervals("pg-boss", anchors={"lease": "expiration"}, intervals=(
    # expireInSeconds is cast ::int (plans.js insertJob): whole seconds, at least 1
    timing.Interval("expiration", 900.0, kind=timing.WAIT, grid=timing.WHOLE,
                    setting="send(.., {expireInSeconds: 900})"),
    # at least 1 s: rarer than documented only delays when an expired job comes back (the run's
    # limits stretch by it); reported, never raising the scale
    timing.Interval("maintenance interval", 120.0, grid=timing.WHOLE, recovery=True, bound=None,
                    setting="new PgBoss({maintenanceIntervalSeconds: 120})"),
    # at least 0.5 s (attorney.js POLICY.MIN_POLLING_INTERVAL_MS): only delays a fetch, reported
    timing.Interval("polling interval", 2.0, bound=None, setting="work(.., {pollingIntervalSeconds: 2})"),
))


class PgBoss(ContractDesign):
    """pg-boss 10.4.2 in Node, through the contract (``adapters/node/pg-boss.js``)."""

    name = library = "pg-boss"
    one_host = True  # node-postgres: a multi-host DSN is "Invalid URL" (issue 37); the replica endpoint
    SCRIPT = Path(__file__).parent / "node" / "pg-boss.js"  # run by node
    TIMING = TIMING
    min_time_scale = TIMING.min_time_scale()  # 1: the whole-second expiration is the lease
    # Its maintenance's expiry (boss.js:24, :163-164 expire(): plans.locked(failJobsByTimeout), plans.js:566,
    # :961), by its digest (tests/unit/test_recovery_statements.py derives it).
    recovery_statements = ("bfe5c062",)
    # work(name, handler): one fetch of batchSize 1 (src/attorney.js:135, its default) handled at a time
    # (manager.js watch). Not a bound on executions: a handler past its expiration keeps running while
    # the retry starts (module docstring); the body's pool makes room for those (DesignHandle.pool_size).
    concurrency = 1
    OPTIONS = {"finish": "work (default: work(), pg-boss completes after the handler, on its own pool) or "
                         "transaction (fetch(), and complete(.., {db}) in the body's finishing transaction)",
               "fairness": "off (default: the queue's standard policy) or per-tenant-singleton (the "
                           "'singleton' policy, one active job per singletonKey, the key the tenant)",
               "batch_size": "work(.., {batchSize}) (default 1, pg-boss's): jobs fetched at once, handled "
                             "one after another in one handler call (finish=work only)"}

    def __init__(self, **options: str):
        super().__init__(**options)
        finish = self.choice("finish", ("work", "transaction"))
        # batch_size > 1: one fetch activates that many jobs (plans.js fetchNextJob LIMIT $2); the handler
        # runs them one after another and pg-boss completes (or, if it throws, fails) the whole batch
        # (manager.js watch: complete(name, jobIds) or fail(name, jobIds), src/manager.js:215-219)
        if self.whole("batch_size", 1) > 1 and finish != "work":
            raise UsageError("design pg-boss: batch_size applies to finish=work (fetchAndComplete takes one "
                             "job at a time)")
        # per-tenant-singleton: singletonKey tenant_<id> (node/pg-boss.js), one active job per key (plans.js,
        # index job_i2)
        self.tenant_cap = 1 if self.choice("fairness", ("off", "per-tenant-singleton")) != "off" else None

