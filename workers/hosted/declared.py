"""A hosted design as a declaration: a status map and named SQL, as the worker contract's descriptor has them.

The worker contract (:mod:`workers.hosted.contract`) reads a queue's state by the SQL its client's
descriptor gives and maps its statuses by the descriptor's map. :class:`DeclaredDesign` gives an
adapter in Python the same: it states

``STATUS``
    ``{library status: harness state}`` (:data:`~workers.hosted.protocol.STATES`); a status left out
    is passed through as it is, and the properties that read it say ``unknown``;
``SQL``
    its ``.sql`` file (:func:`core.sqlfile.load`), whose named statements run on the admin connection:
    ``reset``; ``pending`` (one row, one count); ``final_states`` (one row per schedule job, the
    columns :data:`FINAL` -- ``tenant_id``, ``last_error`` and ``lease_expired`` may be left out: the
    schedule's tenant, None, None); optionally ``accepted_finishes`` (a row per finish, the columns
    :data:`FINISH`, read by :func:`accepted` or by the adapter's :attr:`DeclaredDesign.FINISHES`);
``sql_params()``
    the run's values those statements name (``%(stale)s``: a threshold derived from the schedule);
    each statement gets the ones it names.

:func:`admin_dsn` is the admin connection's DSN with its password, for a library's own installer or
client; :func:`grant` gives the worker role its privileges on the library's tables; :func:`final_states`
and :func:`accepted` are shared with the contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from psycopg import conninfo, sql

from ...core import sqlfile
from ...core.schedule import Schedule
from .protocol import HostedDesign

FINAL = ("id", "tenant_id", "status", "attempts", "last_error", "lease_expired")
"""``final_states``' columns: ``id`` the schedule's job id (``job_map.job_id``), ``status`` the library's."""
FINISH = ("id", "outcome", "what", "at", "attempt", "recorded")
"""``accepted_finishes``' columns (and ``clock``, optional): a row per finish; a job with none, one row
with ``outcome`` null (``workers/hosted/protocol.py`` gives each one's meaning)."""


def admin_dsn(conn) -> str:
    """The DSN of the open connection *conn*, its password included (``conn.info.dsn`` leaves it out)."""
    return conninfo.make_conninfo(conn.info.dsn, password=conn.info.password)


def grant(conn, worker_role: str, privileges: str, names: Iterable[str], *, on: str = "table") -> None:
    """``grant PRIVILEGES on ON NAME to WORKER_ROLE`` for each of *names* (``on``: table, sequence, ...)."""
    role = sql.Identifier(worker_role)
    for name in names:
        conn.execute(sql.SQL("grant {} on {} {} to {}").format(
            sql.SQL(privileges), sql.SQL(on), sql.Identifier(name), role))


def final_states(rows: Iterable[Mapping], status: Mapping[str, str], schedule: Schedule | None) -> list[dict]:
    """*rows* (mappings with :data:`FINAL`'s names) as ``final_states`` answers: the library's status
    mapped by *status* (one it does not name passed through), the schedule's tenant where a row has
    no ``tenant_id``, ``last_error`` and ``lease_expired`` None where a row has none."""
    tenants = {j.id: j.tenant for j in schedule.jobs} if schedule is not None else {}
    return [{"id": r["id"], "tenant_id": r["tenant_id"] if "tenant_id" in r else tenants.get(r["id"]),
             "status": status.get(r["status"], r["status"]), "attempts": r["attempts"],
             "last_error": r.get("last_error"), "lease_expired": r.get("lease_expired")} for r in rows]


def accepted(rows: Iterable[Mapping], *, complete: bool = True) -> dict[int, dict]:
    """*rows* (mappings with :data:`FINISH`'s names, ``clock`` optional) as ``accepted_finishes``
    answers, by job in their order; *complete* False: the library keeps its last finish of a job only."""
    out: dict[int, dict] = {}
    for r in rows:
        entry = out.setdefault(r["id"], {"finishes": [], "recorded": r["recorded"], "complete": complete})
        if r["outcome"] is not None:
            finish = {k: r[k] for k in ("outcome", "what", "at", "attempt")}
            entry["finishes"].append({**finish, "clock": r["clock"]} if r.get("clock") else finish)
    return out


def named(queries: sqlfile.Queries | None, name: str) -> str | None:
    """The statement *name* of *queries*, or None when it has none."""
    try:
        return getattr(queries, name) if queries is not None else None
    except LookupError:
        return None


class DeclaredDesign(HostedDesign):
    """A hosted design whose ``reset``, ``pending``, ``final_states`` and ``accepted_finishes`` are its
    declarations (the module docstring): it writes ``install``, ``enqueue`` and ``run_worker``."""

    STATUS: Mapping[str, str] = {}
    SQL: sqlfile.Queries | None = None
    # Reads the rows of SQL.accepted_finishes where one row a finish cannot say what the library keeps
    # (an event stream, a list of errors): a function of the rows, as a staticmethod. None: accepted().
    FINISHES: Callable[[list[dict]], dict[int, dict]] | None = None

    def sql_params(self) -> dict:
        """The values the statements name, from the run's view (:meth:`for_run`)."""
        return {}

    def rows(self, conn, name: str) -> list[dict]:
        """The rows of the statement *name*, as ``{column: value}``, with the parameters it names."""
        query = getattr(self.SQL, name)
        wanted = sqlfile.params(query)
        values = self.sql_params()
        cur = conn.execute(query, {k: values[k] for k in wanted} if wanted else None)
        columns = [c.name for c in cur.description]
        return [dict(zip(columns, row, strict=True)) for row in cur]

    def reset(self, conn) -> None:
        reset = named(self.SQL, "reset")
        if reset is None:
            raise NotImplementedError(f"{type(self).__name__}: no reset statement")
        conn.execute(reset)

    def pending(self, conn) -> int:
        (row,) = self.rows(conn, "pending")
        return int(next(iter(row.values())))

    def final_states(self, conn) -> list[dict]:
        return final_states(self.rows(conn, "final_states"), self.STATUS, self.schedule)

    def accepted_finishes(self, conn) -> dict[int, dict] | None:
        if named(self.SQL, "accepted_finishes") is None:
            return None
        rows = self.rows(conn, "accepted_finishes")
        return self.FINISHES(rows) if self.FINISHES is not None else accepted(rows)
