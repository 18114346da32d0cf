"""The tenant setting each execution's own statements ran under, from the execution log.

A worker logs a ``tenant-statement`` record (``workers/body/statements.py``) for each statement a job's
thread sends that is not the harness's body's -- the user's own code, whatever table it reads, and a
design's own statements -- with the design's tenant setting in force on that connection when it ran
(``workers/tenant/track.py``: ``value`` a string, empty for none, or ``known`` false when it cannot be
known). The wrapper keeps a thread's last job as current after the job ended, so a record is kept
here only between that execution's ``started`` record and its end (its terminal record, or where the
history ends it): the worker's next claim is no statement of the job it last ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from .events import LogEvent, event_of
from .history import Execution, History


@dataclass(frozen=True)
class StatementTenant:
    """One of an execution's statements and the tenant setting it ran under."""

    job: int
    attempt: int
    worker: str
    t: float
    statement: str
    value: str | None  # "" none; None with known False: it could not be known
    known: bool = True

    def as_tenant(self, tenant: int | None) -> str | None:
        """The tenant it ran as when that is not *tenant* (a job's own, None for a system job): the
        setting's value; None when it ran as the job's own tenant, as none, or unknown."""
        if not self.known or self.value in (None, ""):
            return None
        return None if tenant is not None and self.value == str(tenant) else self.value


def statement_tenants(h: History,
                      executions: list[Execution] | None = None) -> dict[int, list[StatementTenant]]:
    """``{index in executions: its statements}`` (*executions*: ``h.executions()`` unless given), each
    in time order; a record outside every execution of its job on its worker is left out."""
    executions = h.executions() if executions is None else executions
    spans: dict[tuple[str, int, int], list[tuple[int, Execution]]] = {}
    for i, ex in enumerate(executions):
        spans.setdefault((ex.worker, ex.job, ex.attempt), []).append((i, ex))
    out: dict[int, list[StatementTenant]] = {}
    for r in sorted(h.records, key=lambda r: r["t"]):
        if event_of(r) != LogEvent.TENANT_STATEMENT:
            continue
        for i, ex in spans.get((r["worker"], r["job"], r["attempt"]), ()):
            if ex.start <= r["t"] <= (ex.end if ex.end is not None else h.t1):
                out.setdefault(i, []).append(StatementTenant(
                    r["job"], r["attempt"], r["worker"], r["t"], r.get("statement") or "?", r.get("value"),
                    bool(r.get("known", True))))
                break
    return out
