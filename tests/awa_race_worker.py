"""One awa runtime (awa-pg's ``AsyncClient``) for ``tests/chaos/test_awa.py``'s forced race of a
stale-receipt rescue and a completion; not product code.

Usage: ``python tests/awa_race_worker.py ROLE URL QUEUE FLAGS`` where FLAGS is a directory the test
and this process share:

- ``leader``: the maintenance leader. It serves QUEUE -- a queue of its own, where the test inserts
  nothing: it runs no job, so it heartbeats none -- with a 2 s
  heartbeat staleness, a stale-receipt rescue every 200 ms and a leader election every 200 ms, and
  writes ``FLAGS/leader.health`` (JSON: ``{"leader": bool}``) every 50 ms. Started first, it wins the
  election: the rescues under test are its.
- ``worker``: the job's worker, never the leader (its election interval is 10 minutes, and the leader
  holds the lock when it starts) and silent for the test's length (a heartbeat every 30 s). It writes
  ``FLAGS/worker.health`` every 50 ms. Its handler for a ``race_job`` ``n`` writes ``started.n.A``
  (A: ``job.attempt``); on attempt 1 it waits for ``FLAGS/finish.n`` to exist; it writes
  ``returning.n.A`` and returns, and awa completes the job.
- ``insert``: inserts ``race_job`` ``n`` (the FLAGS argument is ``n`` here) into QUEUE with
  ``max_attempts`` 5 through awa's own ``Client.insert`` and prints its id.

Both runtimes stop (``shutdown()``, ``close()``) once ``FLAGS/stop`` exists. The queue ring and the
claim ring rotate hourly, so that no rotation moves the claim under test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path

import awa

KIND = "race_job"
STALENESS_MS = 2000  # the leader's heartbeat_staleness_ms; the test waits it out (module docstring)
HOUR_MS = 3_600_000


@dataclasses.dataclass
class RaceJob:
    n: int


async def serve(role: str, url: str, queue: str, flags: Path) -> None:
    client = awa.AsyncClient(url)

    async def handle(job) -> None:
        n, attempt = job.args.n, job.attempt
        (flags / f"started.{n}.{attempt}").write_text(str(time.time()))
        while attempt == 1 and not (flags / f"finish.{n}").exists():
            await asyncio.sleep(0.01)
        (flags / f"returning.{n}.{attempt}").write_text(str(time.time()))

    client.task(RaceJob, kind=KIND, queue=queue)(handle)
    if role == "leader":
        timing = dict(heartbeat_staleness_ms=STALENESS_MS, heartbeat_interval_ms=600,
                      heartbeat_rescue_interval_ms=200, leader_election_interval_ms=200)
    else:
        timing = dict(heartbeat_staleness_ms=90_000, heartbeat_interval_ms=30_000,
                      heartbeat_rescue_interval_ms=30_000, leader_election_interval_ms=600_000)
    await client.start([{"name": queue, "max_workers": 4}], deadline_rescue_interval_ms=600_000,
                       queue_storage_queue_rotate_interval_ms=HOUR_MS,
                       queue_storage_claim_rotate_interval_ms=HOUR_MS, **timing)
    try:
        while not (flags / "stop").exists():
            health = await client.health_check()
            (flags / f"{role}.health.tmp").write_text(json.dumps({"leader": health.leader}))
            (flags / f"{role}.health.tmp").replace(flags / f"{role}.health")
            await asyncio.sleep(0.05)
        await client.shutdown()
    finally:
        await client.close()


def insert(url: str, queue: str, n: int) -> None:
    client = awa.Client(url)
    print(client.insert(RaceJob(n=n), kind=KIND, queue=queue, max_attempts=5).id)
    client.close()


if __name__ == "__main__":
    role, url, queue, last = sys.argv[1:5]
    if role == "insert":
        insert(url, queue, int(last))
    else:
        asyncio.run(serve(role, url, queue, Path(last)))
