"""The reference queue (queue.sql) as a contract client in Python: what a user's own worker looks like.

    pg-job-chaos search --design contract --design-option command="python examples/contract/worker.py"

Any Python >= 3.10 with psycopg 3 runs it: the harness puts ``pgjc_contract`` on ``PYTHONPATH``.
"""

import json
import os
import sys
import time

import pgjc_contract
import psycopg
from psycopg.types.json import Jsonb

SQL = pgjc_contract.load_sql(os.path.join(os.path.dirname(os.path.abspath(__file__)), "queue.sql"))
URL = os.environ.get("DATABASE_URL", "")


def describe():
    pgjc_contract.emit({"kind": "descriptor", "contract": pgjc_contract.CONTRACT,
                        "system": "contract-reference", "version": "1",
                        "runtime": f"python {sys.version.split()[0]}",
                        "sql": {k: SQL[k] for k in ("reset", "pending", "final_states")},
                        "status": {"queued": "queued", "running": "running", "done": "done",
                                   "failed": "dead"}})


def install():
    role = os.environ["PGJC_WORKER_ROLE"]
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(SQL["install"])
        conn.execute(SQL["grant"].replace("{role}", psycopg.sql.Identifier(role).as_string(conn)))
    pgjc_contract.emit({"kind": "installed"})


def enqueue():
    req = json.load(sys.stdin)
    with psycopg.connect(URL) as conn:
        ids = [[a["job"], conn.execute(SQL["enqueue"],
                                       {"args": Jsonb(a), "max_attempts": req["max_attempts"]}).fetchone()[0]]
               for a in req["jobs"]]
    pgjc_contract.emit({"kind": "enqueued", "ids": ids})


def work():
    client = pgjc_contract.Client()
    client.watch_statements()  # the queue's own statements are strike points too
    lease, poll = client.seconds["lease"], client.seconds["poll"]
    with psycopg.connect(URL, autocommit=True, application_name=f"{client.identity}/queue") as conn:
        while client.may_dequeue():
            row = conn.execute(SQL["claim"], {"lease": lease}).fetchone()
            if row is None:
                time.sleep(poll)
                continue
            job_id, args, attempts = row
            try:
                client.run_job(args, attempts)
            except Exception as exc:
                conn.execute(SQL["fail"], {"id": job_id, "error": f"{type(exc).__name__}: {exc}"})
            else:
                conn.execute(SQL["finish"], {"id": job_id})


if __name__ == "__main__":
    pgjc_contract.main({"describe": describe, "install": install, "enqueue": enqueue, "work": work})
