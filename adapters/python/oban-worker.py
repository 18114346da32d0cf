"""oban-py (PyPI ``oban`` 0.7.0, Python >= 3.12) through the worker contract's Python client: the
command ``adapters/oban.py`` runs in a Python 3.12 interpreter (``docs/reference/contract.md``).

Configured as oban-py's docs do: an ``AsyncConnectionPool`` (psycopg 3), ``oban.schema.install``,
``Oban(pool=.., queues={"default": 10}, prefix=..)`` -- the docs' example limit -- started with
``await oban.start()``, a ``@worker(queue="default")`` class whose ``process`` runs the harness's body,
``Job.new(.., max_attempts=n)`` enqueued with ``oban.enqueue``. The intervals are oban's documented
defaults in their ratios to the lease (``adapters/oban.py``: TIMING), given as the documented config
dicts (``lifeline``, ``refresher``, ``stager``); the retry backoff is oban's own default
(``_backoff.jittery_clamped``) scaled by the same factor, through the documented ``backoff`` hook.
"""

import asyncio
import json
import os
import sys

import oban
import pgjc_contract
from oban import Oban, worker
from oban import _backoff as backoff_default
from oban.schema import install as oban_install
from psycopg_pool import AsyncConnectionPool

PREFIX = "oban"
QUEUE = "default"
URL = os.environ.get("DATABASE_URL", "")
CLIENT = None  # the contract client, in `work`
SCALE = 1.0  # the backoff's factor: our rescue_after / oban's 300 s


@worker(queue=QUEUE)
class HostedJob:
    async def process(self, job):
        await CLIENT.run_job_async(job.args, job.attempt)

    def backoff(self, job):
        return int(round(backoff_default.jittery_clamped(job.attempt, job.max_attempts) * SCALE))


def describe():
    t = f"{PREFIX}.oban_jobs"
    pgjc_contract.emit({
        "kind": "descriptor", "contract": pgjc_contract.CONTRACT, "system": "oban",
        "version": oban.__version__, "runtime": f"python {sys.version.split()[0]}",
        "sql": {"reset": f"truncate {t}",
                "pending": f"select count(*) from {t} "
                           "where state in ('available', 'scheduled', 'retryable', 'executing')",
                "final_states": f"select id::text, state::text, attempt, errors->-1->>'error', null from {t}",
                # What oban accepted (docs/reference/contract.md): every error its ack appended
                # (ack_job.sql, fenced by attempted_at; _executor.py _format_error names the attempt)
                # and a completion at completed_at (UTC, no zone). A discard by the lifeline
                # (rescue_jobs.sql) appends no error: no execution's finish, left out.
                "accepted_finishes": f"""
                    select j.id::text, f.outcome, f.what, f.at, f.attempt,
                           format('oban_jobs state %s, attempt %s, %s errors', j.state, j.attempt,
                                  jsonb_array_length(j.errors))
                      from {t} j
                      left join lateral (
                           select 'failure' as outcome, format('errors[%s]', e.i - 1) as what,
                                  null::timestamptz as at, (e.v->>'attempt')::int as attempt, e.i as ord
                             from jsonb_array_elements(j.errors) with ordinality e(v, i)
                           union all
                           select 'success', 'state completed', j.completed_at at time zone 'UTC',
                                  j.attempt, 1e9
                            where j.state = 'completed') f on true
                     order by j.id, f.ord"""},
        "status": {"available": "queued", "scheduled": "queued", "retryable": "queued",
                   "executing": "running", "completed": "done", "discarded": "dead", "cancelled": "dead"}})


async def _pool(**kw):
    pool = AsyncConnectionPool(URL, open=False, **kw)
    await pool.open()
    return pool


async def install():
    pool = await _pool()
    async with pool.connection() as conn:
        await conn.execute(f"create schema if not exists {PREFIX}")
    await oban_install(pool, prefix=PREFIX)
    role = '"' + os.environ["PGJC_WORKER_ROLE"].replace('"', '""') + '"'
    async with pool.connection() as conn:
        # oban's worker: its jobs, producers and leaders tables, its enum types, its notifications
        await conn.execute(f"grant usage on schema {PREFIX} to {role}")
        await conn.execute(f"grant select, insert, update, delete on all tables in schema {PREFIX} "
                           f"to {role}")
        await conn.execute(f"grant usage on all sequences in schema {PREFIX} to {role}")
    await pool.close()
    pgjc_contract.emit({"kind": "installed"})


async def enqueue():
    req = json.load(sys.stdin)
    pool = await _pool()
    async with Oban(pool=pool, prefix=PREFIX) as o:  # client mode: no queues
        ids = [[a["job"], (await o.enqueue(HostedJob.new(a, max_attempts=req["max_attempts"],
                                                         queue=queue_of(req, a)))).id]
               for a in req["jobs"]]
    await pool.close()
    pgjc_contract.emit({"kind": "enqueued", "ids": ids})


def queue_of(req, args):
    """fairness=per-tenant-queue: a queue per tenant (oban's per-queue limits, ``queues: Queue names mapped
    to worker limits``, oban.py; Pro's partitioned global limits are not in oban-py); else the one."""
    fairness = (req.get("options") or {}).get("fairness", "off")
    if fairness not in ("off", "per-tenant-queue"):
        raise ValueError(f"fairness={fairness}")
    return f"tenant_{args['tenant']}" if fairness == "per-tenant-queue" else QUEUE


async def work_queues(pool, options):
    """The queues this worker runs, each at the docs' example limit 10 (option queue_limit). per-tenant-queue:
    those the run's jobs were inserted into (every job is enqueued before the workers start; a queue made
    later is not run)."""
    limit = int(options.get("queue_limit", 10))
    if options.get("fairness") != "per-tenant-queue":
        return {QUEUE: limit}
    async with pool.connection() as conn:
        rows = await (await conn.execute(f"select distinct queue from {PREFIX}.oban_jobs")).fetchall()
    return {q: limit for (q,) in rows}


async def work():
    global CLIENT, SCALE
    CLIENT = client = pgjc_contract.Client()
    client.watch_statements()  # oban's own statements (psycopg) are strike points too
    t = client.intervals
    SCALE = t["rescue after"] / 300.0
    pool = await _pool(kwargs={"application_name": f"{client.identity}/queue"})
    queues = await work_queues(pool, client.options)
    o = Oban(pool=pool, prefix=PREFIX, queues=queues, node=client.identity,
             lifeline={"interval": t["lifeline interval"], "rescue_after": t["rescue after"]},
             refresher={"interval": t["refresher interval"], "max_age": t["producer max age"]},
             stager={"interval": t["stager interval"]})
    await o.start()
    while client.may_dequeue():
        await asyncio.sleep(client.seconds["poll"])
    await o.stop()
    await pool.close()


if __name__ == "__main__":
    pgjc_contract.main({"describe": describe, "install": lambda: asyncio.run(install()),
                        "enqueue": lambda: asyncio.run(enqueue()), "work": lambda: asyncio.run(work())})
