"""``tenant-isolation``: every execution ran in exactly its own tenant's context.

Two ways a job's tenant context can be recorded (``core/history.py``):

* the harness's tenant modes (``workers/tenant/modes.py``): the body reads the setting the connection
  *inherited* before it sets any -- it must be empty -- then sets the job's tenant and reads;
* the worker's own tenant code (``workers/hosted/own_connection.py``): the body reads the setting as the
  job's code begins -- it must be exactly the job's tenant, empty for a system job -- and reads.

Either way, the reads must see exactly the job's tenant's invoices: none of another tenant's, and
all of its own (the data set's count, recorded in the history). Fewer -- in particular none -- means
the reads ran without the job's tenant: under forced row-level security that is no error, just an
apparently empty tenant (the article's rls-queue mechanism).

Beside the harness's own read, every statement the job's own code sent between the execution's start
and end (``core/statement_tenants.py``; the user's code whatever table it reads, a design's own
statements) is judged by the tenant setting in force when it ran, tracked client-side per connection
(``workers/tenant/track.py``): one that ran as another tenant -- or as any tenant, for a system job --
is a leak, whether or not the table it read has row-level security (the harness need not know the
table). Running with no tenant set is no leak (a read then sees nothing under forced row-level
security; the harness's own read judges that). A statement whose setting could not be known (a
computed ``set_config``) makes the property ``unknown`` unless a leak is found elsewhere.
"""

from __future__ import annotations

from ..core.history import Execution, History
from ..core.statement_tenants import StatementTenant, statement_tenants
from .checks import plural
from .core import Mark, Result, decides, held, unknown, violated


def _session_user(ex: Execution, executions: list[Execution]) -> str:
    """Whose setting it was: from the harness's session marker, or -- where the worker's own code runs
    and no marker is set -- the last execution before this one on the same server session."""
    session = f" on server session {ex.server_pid}" if ex.server_pid is not None else ""
    parts = (ex.inherited_from or "").split()
    if len(parts) == 3:
        worker, job, attempt = parts
    else:
        before = [o for o in executions if o is not ex and o.server_pid is not None
                  and o.server_pid == ex.server_pid and o.start < ex.start]
        if not before:
            return ""
        last = max(before, key=lambda o: o.start)
        worker = last.worker
        job = str(last.job)
        attempt = str(last.attempt)
    if worker != ex.worker:
        return f" from another worker's job: {worker}'s job {job} attempt {attempt}{session}"
    return f" from its own worker's job {job} attempt {attempt}{session}"


def _wrong(ex: Execution, executions: list[Execution], expected: dict[str, int]) -> list[str]:
    wrong = []
    if ex.own_tenant and ex.seen_read:
        want = "" if ex.tenant is None else str(ex.tenant)
        if (ex.seen or "") != want:
            if ex.seen in (None, ""):
                wrong.append("began with no tenant set by the worker's tenant code")
            else:
                wrong.append(f"began as tenant {ex.seen}{_session_user(ex, executions)}")
    elif ex.inherited not in (None, ""):
        wrong.append(f"started with app.tenant={ex.inherited} inherited{_session_user(ex, executions)}")
    if ex.foreign:  # a system job (tenant None) counts every visible row as foreign
        wrong.append(f"saw {ex.foreign} invoices of another tenant")
    own = expected.get(str(ex.tenant)) if ex.tenant is not None else None
    if own is not None and ex.visible is not None:
        mine = ex.visible - (ex.foreign or 0)
        if mine < own:
            why = ": it ran without its tenant" if mine == 0 else ""
            wrong.append(f"read {mine:,} of its {own:,} invoices{why}")
    return wrong


QUOTED = 3  # statements quoted per execution in the evidence; the rest are counted


def _statements(ex: Execution, stmts: list[StatementTenant]) -> list[str]:
    """``ran "STATEMENT" as tenant N`` for each of the job's statements that ran as another tenant."""
    leaks = [(st, st.as_tenant(ex.tenant)) for st in stmts]
    lines = [f'ran "{st.statement}" as tenant {value}' for st, value in leaks if value is not None]
    more = len(lines) - QUOTED
    return lines[:QUOTED] + ([f"{more} more statement{'s' if more > 1 else ''} as another tenant"]
                             if more > 0 else [])


def _mark(ex: Execution, stmts: list[StatementTenant], wrong: list[str]) -> Mark:
    """The event the evidence names: the first statement that ran as another tenant, else the start of
    the execution that began in, or read, another tenant's context."""
    leak = next((st for st in stmts if st.as_tenant(ex.tenant) is not None), None)
    if leak is not None:
        return Mark(leak.t, "statement", ex.worker, ex.job,
                    f'job {ex.job} ran "{leak.statement}" as tenant {leak.as_tenant(ex.tenant)}',
                    attempt=ex.attempt)
    return Mark(ex.start, "execution", ex.worker, ex.job, f"job {ex.job} attempt {ex.attempt} {wrong[0]}",
                attempt=ex.attempt)


@decides("tenant-isolation", group="safety", position=1)
def tenant_isolation(h: History, name: str) -> Result:
    """Violated by every execution that began in another job's tenant context (an inherited
    ``app.tenant``; with the worker's own tenant code, a setting other than the job's tenant), saw
    another tenant's invoices (a job with no tenant must see none), or saw fewer of its own tenant's
    invoices than the data set holds, or sent a statement of its own as another tenant (a system job:
    as any tenant); unknown when no execution recorded any of it, or when no leak was found and a
    statement's setting could not be known. Count: offending executions."""
    executions = h.executions()
    stmts = {id(executions[i]): found for i, found in statement_tenants(h, executions).items()}
    informed = [ex for ex in executions
                if ex.inherited_read or ex.seen_read or ex.visible is not None or ex.foreign is not None
                or id(ex) in stmts]
    if not informed:
        return unknown(name, f"none of {plural(len(executions), 'execution')} recorded its inherited "
                             "tenant, the rows it could see or a statement of its own")
    lines = []
    jobs = []
    first = None
    # Another worker's setting (only a pooler hands one over) leads the evidence.
    informed.sort(key=lambda ex: " another worker's" not in _session_user(ex, executions))
    for ex in informed:
        wrong = _wrong(ex, executions, h.expected_rows) + _statements(ex, stmts.get(id(ex), []))
        if wrong:
            whose = f"tenant {ex.tenant}" if ex.tenant is not None else "no tenant"
            lines.append(f"job {ex.job} ({whose}) " + " and ".join(wrong))
            jobs.append(ex.job)
            first = first or _mark(ex, stmts.get(id(ex), []), wrong)
    if lines:
        return violated(name, lines, jobs, event=first)
    blind = [(ex, st) for ex in informed for st in stmts.get(id(ex), []) if not st.known]
    if blind:
        ex, st = blind[0]
        many = plural(len(blind), "such statement")
        return unknown(name, f'job {ex.job} ran "{st.statement}" with a tenant setting that cannot be known '
                             f"client-side (computed where it was set; {many}): set it from a literal or a "
                             "parameter")
    complete = " and all of its own" if h.expected_rows else ""
    began = ("began in another's tenant context" if any(ex.own_tenant for ex in informed)
             else "inherited a tenant")
    judged = sum(len(v) for v in stmts.values())
    own = f", none of {plural(judged, 'statement')} of their own ran as another tenant" if judged else ""
    return held(name, f"{plural(len(informed), 'execution')} recorded: none {began}, "
                      f"none saw another tenant's rows{complete}{own}")
