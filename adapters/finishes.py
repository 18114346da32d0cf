"""What a hosted library accepted, where one row a finish cannot say it: the adapters' ``FINISHES``.

Each adapter's ``accepted_finishes`` statement (in its ``.sql``) reads the library's own tables on the
admin connection after a run; where the library keeps one finish a row, the rows are the answer
(``workers/hosted/declared.py``, :func:`~workers.hosted.declared.accepted`: dbos, django-tasks-db, the
contract's queues). The libraries below keep a stream or a list instead; each function turns its rows
(``{column: value}``, in the statement's order) into the shape ``workers/hosted/protocol.py`` documents
-- per schedule job, every finish the library recorded (outcome, its own name for it, when) and one
line of what it recorded -- for ``library-one-finish``. What each keeps (lines of the pinned versions):

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
awa 0.6.9
    ``awa.jobs``: one ``errors`` entry per failure it accepted (``attempt``, ``at`` on the worker's
    clock, ``lifecycle_error`` / ``executor.rs``) -- a rescue's entry is its recovery, ``requeued`` --
    and, for ``completed``, the success at ``finalized_at`` (the worker's ``Utc::now()`` in queue
    storage, the server's ``now()`` in canonical). A finish from a replaced ``run_lease`` touches no
    row, so it leaves no entry (refused). A job no longer in its tables (pruned) is left out.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping

# procrastinate_events type -> outcome ("cancelled" is decided by the job's final status)
PROCRASTINATE = {"succeeded": "success", "failed": "failure", "aborted": "failure",
                 "deferred_for_retry": "requeued"}
# pgqueuer_log status -> outcome (a 'queued' row with a traceback is a retry: a failure)
PGQUEUER = {"successful": "success", "exception": "failure", "failed": "failure"}
# The errors awa's rescues write (queue_storage.rs:12990-13150, maintenance.rs:1250-1360): a recovery.
AWA_RESCUES = ("heartbeat stale", "receipt claim stale", "hard deadline exceeded", "rescued as duplicate")

Rows = Iterable[Mapping]


def _group(rows: Rows) -> dict[int, list[Mapping]]:
    out: dict[int, list[Mapping]] = {}
    for r in rows:
        out.setdefault(r["id"], []).append(r)
    return out


def procrastinate(rows: Rows) -> dict[int, dict]:
    """Rows ``id, status, attempts, event, at``: every event of a job, its final status and attempts."""
    out = {}
    for job, events in _group(rows).items():
        status = events[0]["status"]
        attempts = events[0]["attempts"]
        kinds = [(r["event"], r["at"]) for r in events if r["event"] is not None]
        finishes = []
        for kind, at in kinds:
            outcome = PROCRASTINATE.get(kind)
            if kind == "cancelled":  # todo -> cancelled / failed / succeeded: the final status says which
                outcome = {"succeeded": "success", "failed": "failure"}.get(status)
                kind = f"cancelled (todo -> {status})"
            if outcome:
                finishes.append({"outcome": outcome, "what": kind, "at": at})
        recorded = ", ".join(k for k, _ in kinds) or "no event"
        out[job] = {"finishes": finishes,
                    "recorded": f"procrastinate_events {recorded}; status {status}, attempts {attempts}"}
    return out


def pgqueuer(rows: Rows) -> dict[int, dict]:
    """Rows ``id, status, at, traceback`` (whether the row has one): every pgqueuer_log row of a job."""
    out = {}
    for job, logged in _group(rows).items():
        finishes = []
        names = []
        for r in logged:
            if r["status"] is None:
                continue
            retry = r["status"] == "queued" and r["traceback"]
            names.append("queued (retry)" if retry else r["status"])
            outcome = "failure" if retry else PGQUEUER.get(r["status"])
            if outcome:
                what = "retry_job" if retry else r["status"]
                finishes.append({"outcome": outcome, "what": what, "at": r["at"]})
        out[job] = {"finishes": finishes, "recorded": f"pgqueuer_log {', '.join(names) or 'no row'}"}
    return out


def chancy(rows: Rows) -> dict[int, dict]:
    """Rows ``id, state, attempts, max_attempts, errors, completed_at``: a job's chancy_jobs row."""
    out = {}
    for r in rows:
        state = r["state"]
        attempts = r["attempts"]
        errors = list(r["errors"] or [])
        finishes = [{"outcome": "failure", "what": f"errors[{i}]", "at": None, "clock": "worker",
                     "attempt": _one_based(e)} for i, e in enumerate(errors)]
        if state == "failed" and finishes:  # the last error is the final failure: completed_at dates it
            finishes[-1].update(what=f"errors[{len(errors) - 1}], state failed", at=r["completed_at"])
        elif state == "succeeded":
            finishes.append({"outcome": "success", "what": "state succeeded", "at": r["completed_at"],
                             "clock": "worker", "attempt": attempts})
        recorded = (f"chancy_jobs state {state}, attempts {attempts}, {len(errors)} errors, "
                    f"max_attempts {r['max_attempts']}")
        out[r["id"]] = {"finishes": finishes, "recorded": recorded}
    return out


def awa(rows: Rows) -> dict[int, dict]:
    """Rows ``id, state, attempt, run_lease, finalized_at, errors, clock`` (finalized_at's clock). A job
    may have more than one row: awa.jobs shows each completion it accepted (a receipt completion and a
    rescued run's, when the rescue raced the first: the finding page
    ``awa-rescue-accepts-raced-completion.md``), each a success here; an error two rows both carry is one
    failure or rescue."""
    out = {}
    for job, mine in _group(rows).items():
        mine = [r for r in mine if r["state"] is not None]  # no row left (pruned): awa's record says nothing
        if not mine:
            continue
        failures: list[dict] = []
        successes: list[dict] = []
        seen: set[tuple] = set()
        recorded = []
        for r in sorted(mine, key=lambda r: r["run_lease"] if r["run_lease"] is not None else -1):
            errors = r["errors"] or []
            for e in errors:
                text = str(e.get("error", ""))
                key = (text, e.get("attempt"), e.get("at"))
                if key in seen:
                    continue
                seen.add(key)
                at = datetime.datetime.fromisoformat(e["at"]) if e.get("at") else None
                outcome = "requeued" if text.startswith(AWA_RESCUES) else "failure"
                failures.append({"outcome": outcome, "what": text[:60], "at": at, "clock": "worker",
                                 "attempt": e.get("attempt")})
            if r["state"] == "completed":
                successes.append({"outcome": "success", "what": "completed", "at": r["finalized_at"],
                                  "clock": r["clock"], "attempt": r["attempt"]})
            texts = "; ".join(f"{e.get('attempt')}: {str(e.get('error', ''))[:40]}" for e in errors) or "none"
            recorded.append(f"awa.jobs state {r['state']}, attempt {r['attempt']}, "
                            f"run_lease {r['run_lease']}, errors [{texts}]")
        out[job] = {"finishes": failures + successes, "recorded": " | ".join(recorded)}
    return out


def _one_based(error: object) -> int | None:
    """The 1-based attempt of a chancy ``errors`` entry, which keeps it 0-based (None: it keeps none)."""
    attempt = error.get("attempt") if isinstance(error, dict) else None
    return attempt + 1 if isinstance(attempt, int) else None
