"""Explained verdicts: a violation that is the consequence of another says so.

A run that ends because its worker budget was spent (``ended_by`` ``workers-exhausted``: a job that
kills every worker that takes it) leaves jobs unfinished and ``running``; ``progress`` and
``terminal-states`` then report what ``bounded-blast-radius`` / ``bounded-attempts`` already found.
Such a result keeps its verdict -- it is still violated -- and gains a ``cause``: the property it
follows from, or ``budget`` when it follows from how the run ended and nothing else explains it. Its
evidence leads with the cause, so a matrix cell never restates a root cause as a new finding.

A hosted design's body (``workers/hosted/protocol.py``) commits its ``job_runs`` row and sends its
effect before the library's own finish runs: a violation of ``single-commit``, ``at-most-once-effects``
or ``no-stale-effect`` there is at-least-once by design, which no fence of the library's could prevent.
It gains the cause ``at-least-once``, and its evidence says so and what ``library-one-finish`` -- the
library's own record -- found, naming the design (a library's name or your own queue's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..core.events import EndedBy
from ..core.history import History
from .core import HELD, VIOLATED, Result

# property: the root causes that explain it, in order of preference
CONSEQUENCES = {
    "terminal-states": ("bounded-attempts", "bounded-blast-radius"),
    "progress": ("bounded-blast-radius", "bounded-attempts"),
    "transient-recovers": ("bounded-blast-radius", "bounded-attempts"),
}
BUDGET = "budget"
# hosted: what the body did before the library's finish, and what judges the library instead
AT_LEAST_ONCE = "at-least-once"
BODY_FIRST = ("single-commit", "at-most-once-effects", "no-stale-effect")
LIBRARY = "library-one-finish"


def _hosted(queue: str) -> str:
    """The at-least-once lead, naming the hosted queue: a library's name or your own design's."""
    # Hazard: on a library's atomic finish path (DBOS's and pg-boss's finish=transaction) the job_runs row
    # commits with the finish and only the effect precedes it: the lead says both cases.
    return (f"the body's work ran before {queue}'s finish committed (its effect, and its job_runs row "
            f"unless {queue} commits it with its finish): at-least-once by design, not {queue}'s fence")


def _jobs(jobs: Iterable[int]) -> str:
    return ", ".join(str(j) for j in jobs)


def _library(queue: str, results: dict[str, Result]) -> str:
    r = results.get(LIBRARY)
    if r is None:
        return ""
    if r.status == VIOLATED:
        return f" (but {queue} also accepted a finish it should not have, see {LIBRARY})"
    if r.status == HELD:
        return f" ({queue} accepted at most one success per job, none stale: {LIBRARY} held)"
    return f" (what {queue} accepted is unknown: {LIBRARY})"


def explain(h: History, results: dict[str, Result]) -> dict[str, Result]:
    """*results* with every consequence given its cause (see the module docstring)."""
    out = dict(results)
    if h.hosted:
        queue = h.design or "the hosted queue"
        for name in BODY_FIRST:
            r = out.get(name)
            if r is not None and r.status == VIOLATED and not r.cause:
                out[name] = dataclasses.replace(r, cause=AT_LEAST_ONCE,
                                                evidence=f"{_hosted(queue)}{_library(queue, results)}: "
                                                         f"{r.evidence}")
    for name, roots in CONSEQUENCES.items():
        r = out.get(name)
        if r is None or r.status != VIOLATED or r.cause:
            continue
        root = next((results[x] for x in roots if x in results and results[x].status == VIOLATED), None)
        same_jobs = root is not None and set(r.jobs) & set(root.jobs)
        if root is not None and (same_jobs or h.ended_by == EndedBy.WORKERS_EXHAUSTED):
            whose = f"job {_jobs(root.jobs)}'s" if root.jobs else "a"
            out[name] = dataclasses.replace(
                r, cause=root.name,
                evidence=f"consequence of {whose} crash loop, see {root.name}: {r.evidence}")
        elif h.ended_by == EndedBy.WORKERS_EXHAUSTED:
            out[name] = dataclasses.replace(
                r, cause=BUDGET, evidence=f"the run ended when its worker budget was spent: {r.evidence}")
    return out
