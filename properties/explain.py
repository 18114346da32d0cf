"""Explained verdicts: a violation that is the consequence of another says so.

A run that ends because its worker budget was spent (``ended_by`` ``workers-exhausted``: a job that
kills every worker that takes it) leaves jobs unfinished and ``running``; ``progress`` and
``terminal-states`` then report what ``bounded-blast-radius`` / ``bounded-attempts`` already found.
Such a result keeps its verdict -- it is still violated -- and gains a ``cause``: the property it
follows from, or ``budget`` when it follows from how the run ended and nothing else explains it. Its
evidence leads with the cause, so a matrix cell never restates a root cause as a new finding.
"""

from __future__ import annotations

import dataclasses

from ..core.history import History
from .core import VIOLATED, Result

# property: the root causes that explain it, in order of preference
CONSEQUENCES = {
    "terminal-states": ("bounded-attempts", "bounded-blast-radius"),
    "progress": ("bounded-blast-radius", "bounded-attempts"),
    "transient-recovers": ("bounded-blast-radius", "bounded-attempts"),
}
BUDGET = "budget"


def _jobs(jobs) -> str:
    return ", ".join(str(j) for j in jobs)


def explain(h: History, results: dict[str, Result]) -> dict[str, Result]:
    """*results* with every consequence given its cause (see the module docstring)."""
    out = dict(results)
    for name, roots in CONSEQUENCES.items():
        r = out.get(name)
        if r is None or r.status != VIOLATED or r.cause:
            continue
        root = next((results[x] for x in roots if x in results and results[x].status == VIOLATED), None)
        same_jobs = root is not None and set(r.jobs) & set(root.jobs)
        if root is not None and (same_jobs or h.ended_by == "workers-exhausted"):
            whose = f"job {_jobs(root.jobs)}'s" if root.jobs else "a"
            out[name] = dataclasses.replace(
                r, cause=root.name, evidence=f"consequence of {whose} crash loop, see {root.name}: {r.evidence}")
        elif h.ended_by == "workers-exhausted":
            out[name] = dataclasses.replace(
                r, cause=BUDGET, evidence=f"the run ended when its worker budget was spent: {r.evidence}")
    return out
