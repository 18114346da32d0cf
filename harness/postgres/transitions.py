"""The jobs table's status changes during a run, for the history (``History.transitions``).

A trigger on ``pgjc.jobs`` (``transitions.sql``) logs every status a job takes -- the enqueue's
``queued``, then each change -- with the server's time, the transaction, the session and the statement
that made it. The log is a table: a change that rolled back leaves no row, so what is read is what
committed, in the order the trigger fired. ``success-final`` (``properties/final.py``) judges from it.
Only a design whose queue is the harness's ``jobs`` leaves rows; a hosted library keeps its own.
"""

from __future__ import annotations

from ...core import sqlfile

Q = sqlfile.load(__file__, "transitions.sql", "install", "read")
TABLE = "job_transitions"  # in the harness's schema; emptied with the queue (schema.sql: reset_queue)
COLUMNS = ("seq", "job_id", "old", "status", "attempts", "at", "xact", "backend", "query")


def install(conn) -> None:
    """Create the log, its function and the trigger (the admin's connection, at provisioning)."""
    conn.execute(Q.install)


def read(conn) -> list[dict]:
    """Every committed status change of the run, oldest first; times as ISO text (the history is JSON)."""
    out = []
    for row in conn.execute(Q.read):
        d = dict(zip(COLUMNS, row, strict=True))
        d["at"] = d["at"].isoformat()
        out.append(d)
    return out
