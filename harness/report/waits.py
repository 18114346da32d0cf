"""Per-tenant waits in the reports (issue 38): the figures of ``core/waits.py`` for one run with more than
one tenant -- in the text (lines after the property table), the JSON (``waits``) and the HTML (a table and
a plot of each tenant's waits over the run). Figures, not verdicts: ``starvation-bound`` judges.

Which run: a replay's own; a search's counterexample when it had more than one tenant, else its largest run
(most jobs) that had.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

from ...core import waits
from ...core.history import History

SHOWN = 6  # tenants the text names before "and N more" (the hottest first)
PLOTTED = 10  # tenants the plot draws (the hottest, then the others by number)


def pick(histories: Sequence[History], first: History | None = None,
         label: str = "the counterexample's run") -> tuple[History, str] | None:
    """The run whose waits a report shows, and how it was chosen (None: no run had two tenants): *first*
    (called *label*) when it had two, else the largest of *histories* that had."""
    if first is not None and _several_tenants(first):
        return first, label
    many = [h for h in histories if _several_tenants(h)]
    if not many:
        return None
    best = max(many, key=lambda h: len(h.schedule.jobs))
    return best, f"the largest run with more than one tenant ({len(best.schedule.jobs)} jobs)"


def _several_tenants(h: History) -> bool:
    """Whether ``core.waits.summary`` has figures for *h* (it has for every run with two tenants' jobs):
    told from the schedule, without working the figures out (:func:`section` does, once)."""
    return len({j.tenant for j in h.schedule.jobs if j.tenant is not None}) > 1


def section(h: History, which: str) -> dict | None:
    """The JSON of one run's waits (``core.waits.summary``, with ``run``: which run it is)."""
    s = waits.summary(h)
    return None if s is None else {"run": which, **s}


def lines(data: dict | None) -> list[str]:
    """The text block: per tenant p50/p99/max, Jain's index, the longest wait behind the hot tenant."""
    if not data:
        return []
    out = [f"waits per tenant, enqueue to first start ({data['run']}; a figure, not a verdict):"]
    rows = list(data["tenants"].items())
    for t, f in rows[:SHOWN]:
        never = f", {f['never_started']} never started" if f["never_started"] else ""
        jobs = f"{f['jobs']:>5} job{'s' if f['jobs'] != 1 else ' '}"
        out.append(f"  tenant {t:>3}: {jobs}  p50 {f['p50']:.3f} s  p99 {f['p99']:.3f} s  "
                   f"max {f['max']:.3f} s{never}")
    if len(rows) > SHOWN:
        out.append(f"  and {len(rows) - SHOWN} more tenants")
    if data["jain"] is None:
        out.append(f"  Jain's index of {data['jain_of']}: not computed (the window in which every tenant "
                   f"was backlogged, {data['jain_window']:.3f} s, is shorter than one job)")
    else:
        out.append(f"  Jain's index of {data['jain_of']} while every tenant was backlogged "
                   f"({data['jain_window']:.3f} s): {data['jain']:.2f} (1: equal; 1/{len(rows)}: one tenant)")
    b = data.get("behind_hot")
    if b:
        waited = "waited" if b["started"] else "never started in"
        hot = b["hot_tenant"]
        whose = f"tenant {b['tenant']}'s job" if b["tenant"] is not None else "the system job (no tenant)"
        out.append(f"  longest behind the hot tenant {hot}: {whose} {b['job']} {waited} "
                   f"{b['wait']:.3f} s while tenant {hot} started {b['hot_jobs_started']} jobs")
    return out


def plot(data: dict | None) -> dict | None:
    """The plot of each tenant's waits over the run as an HTML image (``html.write``'s *images*)."""
    if not data:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        for t in list(data["series"])[:PLOTTED]:
            points = data["series"][t]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", linestyle="-",
                    label=f"tenant {t}")
        ax.set_xlabel("seconds since the run began (the job's first start)")
        ax.set_ylabel("wait, enqueue to first start (s)")
        ax.legend(fontsize="small")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    src = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return {"caption": f"waits per tenant over the run ({data['run']})", "src": src}
