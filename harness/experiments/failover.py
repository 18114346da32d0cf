"""``run.py experiment failover`` (issue 37 item 4): each built-in design through a failover of each kind,
on replicated pairs of its own (``--replica`` is not needed: it starts an async and a sync pair).

A run: three jobs (the first works 0.3 article seconds), two workers, the fault at job 1's ``mid-work``
-- so its finish falls inside a lagging standby's window. Per design and scenario, over the repeats:
acknowledged completions lost (a success the worker saw commit that the promotion lost and that ran
again: ``properties.final.acknowledged_lost``), jobs run more than once, jobs stuck (neither done nor
dead when the run ended), and the time from the primary's stop to the first execution after it. No
figure is written down: every one is measured here. The article measured no failover: its column says so.
"""

from __future__ import annotations

import statistics

from ...core.schedule import Event, JobSpec, Schedule
from ...properties.final import acknowledged_lost
from ..postgres import ServerSpec, provision
from ..runner import Runner
from .common import Context, plot

DESIGNS = ("one-transaction", "one-transaction-handler", "lease", "lease-fenced", "lease-heartbeat",
           "lease-outbox")
# (pair, fault, variant, label): what each scenario strikes with
SCENARIOS = (("async", "failover", "lagging", "async failover (lagging)"),
             ("async", "failover", "switchover", "async switchover"),
             ("sync", "failover", "lagging", "sync failover"),
             ("sync", "failover-cancel", "xid", "sync, wait cancelled"))
ARTICLE = "not measured (the article ran one server)"


def _one(h) -> dict:
    """What one run's history says: lost completions, jobs run twice, stuck jobs, recovery seconds."""
    lost = len(acknowledged_lost(h)[1])
    execs: dict[int, int] = {}
    for e in h.executions():
        execs[e.job] = execs.get(e.job, 0) + 1
    stops = h.promotions()
    starts = sorted(e.start for e in h.executions())
    recover = next((s - stops[0] for s in starts if stops and s > stops[0]), None)
    return {"lost": lost, "twice": sum(n > 1 for n in execs.values()),
            "stuck": sum(j.get("status") not in ("done", "dead") for j in h.jobs), "recover": recover,
            "promoted": bool(stops)}


def failover(ctx: Context) -> dict:
    repeats = ctx.pick(3, 1)
    rows = []
    resets = []
    for mode in ("async", "sync"):
        with provision(ServerSpec(replica=mode)) as db, Runner(db) as runner:
            for _, fault, variant, label in (s for s in SCENARIOS if s[0] == mode):
                for design in DESIGNS:
                    ctx.progress(f"failover: {design}, {label} ({repeats} run(s))")
                    runs = []
                    for _ in range(repeats):
                        schedule = Schedule(jobs=(JobSpec(1, duration=0.3), JobSpec(2), JobSpec(3)),
                                            workers=2, design=design, time_scale=ctx.scale,
                                            events=(Event(fault, 1, point="mid-work", variant=variant),))
                        runs.append(_one(runner.run(schedule)))
                    waits = [r["recover"] for r in runs if r["recover"] is not None]
                    rows.append({"design": design, "scenario": label, "runs": repeats,
                                 "promoted": sum(r["promoted"] for r in runs),
                                 "acknowledged_lost": sum(r["lost"] for r in runs),
                                 "run_twice": sum(r["twice"] for r in runs),
                                 "stuck": sum(r["stuck"] for r in runs),
                                 "recover_s": round(statistics.median(waits), 3) if waits else None,
                                 "article": ARTICLE})
            pair = db.replica
            assert pair is not None  # provisioned with a replica
            pair.settle()  # the last run's reset, measured like the others
            resets += pair.resets
    result = {"experiment": "failover", "rows": rows, "article": ARTICLE,
              "reset_after_promotion_median_s": round(statistics.median(resets), 3) if resets else None,
              "resets": len(resets),
              "note": f"time scale {ctx.scale:g}; reset after a promotion (rewind, start, catch-up): median "
                      + (f"{statistics.median(resets):.3f} s over {len(resets)}" if resets else "-")}
    if ctx.plot_dir is not None:
        def draw(ax) -> None:
            labels = [s[3] for s in SCENARIOS]
            for k, design in enumerate(DESIGNS):
                lost = {r["scenario"]: r["acknowledged_lost"] for r in rows if r["design"] == design}
                ys = [lost.get(lab, 0) for lab in labels]
                ax.bar([i + k * 0.13 for i in range(len(labels))], ys, width=0.13, label=design)
            ax.set_xticks([i + 0.33 for i in range(len(labels))], labels, fontsize=8)
            ax.set_ylabel(f"acknowledged completions lost ({repeats} run(s) each)")
            ax.legend(fontsize=7)

        result["plots"] = [plot(ctx.plot_dir / "failover.png", draw)]
    return result
