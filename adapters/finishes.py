"""What each hosted library itself accepted, from its own tables: the adapters' ``accepted_finishes``.

Each function reads one library's tables on the admin connection after a run and answers in the shape
``workers/hosted/protocol.py`` documents -- per schedule job, every finish the library recorded (outcome, its
own name for it, when) and one line of what it recorded -- for ``library-one-finish``. What each
library keeps (the installed packages, read; lines of the pinned versions):

procrastinate 3.10.0
    ``procrastinate_events``: one row per status transition, written by a trigger at ``now()``
    (``sql/schema.sql:443``, ``procrastinate_trigger_function_status_events_update_v1``). A finish is
    ``succeeded`` / ``failed`` / ``aborted`` (doing -> ...), or ``cancelled`` for a job finished from
    ``todo`` -- a stale execution's finish after the recovery requeued it, since
    ``procrastinate_finish_job_v1`` matches ``status IN ('todo', 'doing')`` (``schema.sql:285``), never
    the worker. ``deferred_for_retry`` (doing -> todo) is the worker's retry of a task that raised or
    the recovery's ``retry_job`` of a stalled job (both ``procrastinate_retry_job_v2``,
    ``schema.sql:393``): the same event, so it is reported ``requeued``.
pgqueuer 1.6.0
    ``pgqueuer_log``: one row per claim (``picked``, re-picks included: ``qb.py:552``, ``log_pick``),
    retry (``queued`` with a traceback: ``build_retry_job_query``, ``qb.py:805``, which matches ``id``
    alone) and finish (``successful``, ``exception``, ...), at ``now()``. The finish's row is written
    only when its ``DELETE ... WHERE id = ANY(..)`` found the job (``build_log_job_query``,
    ``qb.py:684`` and ``704``): a second finish of a deleted job leaves no trace, and the first one
    taken may be a stale manager's. ``pgqueuer_statistics`` only counts per second, status and
    entrypoint: no job ids.
chancy 0.26.0
    no history: the ``chancy_jobs`` row holds what the last accepted completion wrote
    (``worker.py:684``, ``Worker.flush``: ``UPDATE ... WHERE id = %(id)s AND claim_id IS NOT DISTINCT
    FROM %(claim_id)s``, ``worker.py:697``), and every claim draws a new ``claim_id`` (``fetch_jobs``,
    ``worker.py:933``; the recovery clears it, ``plugins/recovery.py:109``), so a completion from a
    replaced claim is dropped. ``state`` ``succeeded`` is one accepted success, at ``completed_at`` (the
    worker's clock: ``executors/base.py:99``, ``Executor.on_job_completed``); each entry of ``errors``
    one accepted failure with the 0-based ``attempt`` it ran as (``executors/base.py:128``; dated only
    for the final ``failed``).
"""

from __future__ import annotations

from ..core import sqlfile

Q = sqlfile.load(__file__, "finishes.sql", "procrastinate", "pgqueuer", "chancy")

# procrastinate_events type -> outcome ("cancelled" is decided by the job's final status)
PROCRASTINATE = {"succeeded": "success", "failed": "failure", "aborted": "failure", "deferred_for_retry": "requeued"}
# pgqueuer_log status -> outcome (a 'queued' row with a traceback is a retry: a failure)
PGQUEUER = {"successful": "success", "exception": "failure", "failed": "failure"}


def _group(rows) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for job, *rest in rows:
        out.setdefault(job, []).append(tuple(rest))
    return out


def procrastinate(conn) -> dict[int, dict]:
    out = {}
    for job, rows in _group(conn.execute(Q.procrastinate)).items():
        status, attempts = rows[0][0], rows[0][1]
        events = [(kind, at) for _, _, kind, at in rows if kind is not None]
        finishes = []
        for kind, at in events:
            outcome = PROCRASTINATE.get(kind)
            if kind == "cancelled":  # todo -> cancelled / failed / succeeded: the final status says which
                outcome = {"succeeded": "success", "failed": "failure"}.get(status)
                kind = f"cancelled (todo -> {status})"
            if outcome:
                finishes.append({"outcome": outcome, "what": kind, "at": at})
        recorded = ", ".join(k for k, _ in events) or "no event"
        out[job] = {"finishes": finishes,
                    "recorded": f"procrastinate_events {recorded}; status {status}, attempts {attempts}"}
    return out


def pgqueuer(conn) -> dict[int, dict]:
    out = {}
    for job, rows in _group(conn.execute(Q.pgqueuer)).items():
        rows = [r for r in rows if r[0] is not None]
        finishes = []
        names = []
        for status, at, traceback in rows:
            retry = status == "queued" and traceback
            names.append("queued (retry)" if retry else status)
            outcome = "failure" if retry else PGQUEUER.get(status)
            if outcome:
                finishes.append({"outcome": outcome, "what": "retry_job" if retry else status, "at": at})
        out[job] = {"finishes": finishes, "recorded": f"pgqueuer_log {', '.join(names) or 'no row'}"}
    return out


def chancy(conn) -> dict[int, dict]:
    out = {}
    for job, state, attempts, max_attempts, errors, completed_at in conn.execute(Q.chancy):
        errors = list(errors or [])
        finishes = [{"outcome": "failure", "what": f"errors[{i}]", "at": None, "clock": "worker",
                     "attempt": e["attempt"] + 1 if isinstance(e, dict) and isinstance(e.get("attempt"), int) else None}
                    for i, e in enumerate(errors)]
        if state == "failed" and finishes:  # the last error is the final failure: completed_at dates it
            finishes[-1].update(what=f"errors[{len(errors) - 1}], state failed", at=completed_at)
        elif state == "succeeded":
            finishes.append({"outcome": "success", "what": "state succeeded", "at": completed_at, "clock": "worker",
                             "attempt": attempts})
        out[job] = {"finishes": finishes, "recorded": f"chancy_jobs state {state}, attempts {attempts}, "
                                                      f"{len(errors)} errors, max_attempts {max_attempts}"}
    return out
