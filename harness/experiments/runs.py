"""Experiments 3, 4 and 5: poison, crash and overrun, as schedules run by the harness itself.

Each is a :class:`~core.schedule.Schedule` run by :class:`~harness.runner.Runner` with the
built-in designs and faults; the figures are read from the :class:`~core.history.History`.
"""

from __future__ import annotations

from ...core.schedule import JobSpec, Schedule, Timing
from ...workers.builtin.lease import Q as LEASE
from ..runner import Runner
from .common import Context

POISON = 1
HEALTHY = 2


def _job(history, job_id: int) -> dict:
    return next(j for j in history.jobs if j["id"] == job_id)


def _executions(history, job_id: int) -> list:
    return [e for e in history.executions() if e.job == job_id]


def _runs(history, job_id: int) -> int:
    return sum(1 for r in history.runs if r["job_id"] == job_id)


def poison(ctx: Context) -> dict:
    article = {
        "one-transaction": "picked 10 of 10, never counted, no job_runs row; the healthy job never ran",
        "one-transaction-handler": "dead after 3 attempts; the queue moved on (healthy job done)",
    }
    rows = []
    with Runner(ctx.database) as runner:
        for design in article:
            schedule = Schedule(jobs=(JobSpec(POISON, fault="sql-error"), JobSpec(HEALTHY)), design=design,
                                dequeues=10, time_scale=ctx.scale)
            ctx.progress(f"poison: {design}")
            h = runner.run(schedule)
            dequeues = len(h.executions())
            bad = _job(h, POISON)
            good = _job(h, HEALTHY)
            rows.append({"design": design, "picked": f"{len(_executions(h, POISON))} of {dequeues}",
                         "attempts_counted": bad["attempts"], "job_runs_rows": _runs(h, POISON),
                         "poison_state": bad["status"], "healthy_job": good["status"],
                         "healthy_ran": bool(_executions(h, HEALTHY)), "article": article[design]})
    return {"experiment": "poison", "rows": rows,
            "article": "10 of 10, never counted, the healthy job never ran; with the handler dead after 3 "
                       "and the queue moved on"}


def crash(ctx: Context) -> dict:
    article = {
        "one-transaction": "every worker died, every time; queued again with attempts 0 (never counted)",
        "lease": "counted at the claim; after 3 crashes no longer eligible, the queue moved on; left "
                 "'running' with attempts 3 and an expired lease",
    }
    restarts = ctx.pick(9, 4)
    rows = []
    with Runner(ctx.database) as runner:
        for design in article:
            schedule = Schedule(jobs=(JobSpec(POISON, fault="crash"), JobSpec(HEALTHY)), design=design,
                                restarts=restarts, time_scale=ctx.scale)
            ctx.progress(f"crash: {design} (restart budget {restarts})")
            h = runner.run(schedule)
            bad = _job(h, POISON)
            good = _job(h, HEALTHY)
            row = {"design": design, "workers_killed": sum(1 for x in h.exits if x.outcome == "exit 1"),
                   "executions": len(_executions(h, POISON)), "attempts": bad["attempts"],
                   "final_state": bad["status"], "lease_expired": bad["lease_expired"],
                   "healthy_job": good["status"], "ended_by": h.ended_by}
            if design == "lease":
                # The sweep the article suggested but did not run, on the state the run left behind.
                with runner.admin.transaction():
                    swept = runner.admin.execute(LEASE.sweep).rowcount
                after = {r[0]: r[1] for r in runner.admin.execute("select id, status from pgjc.jobs")}
                sweep_row = {"design": "lease, then the sweep", "final_state": after[POISON],
                             "sweep": f"{swept} row(s) marked dead",
                             "article": "suggested (status='dead' where the lease expired at max_attempts), "
                                        "not run"}
            row["article"] = article[design]
            rows.append(row)
    rows.append(sweep_row)
    return {"experiment": "crash", "rows": rows,
            "article": "one-transaction: every worker, every time, never counted; lease: dead-ended after 3 "
                       "crashes but left running (attempts 3, lease expired) without a sweep",
            "restart_delay_s": {"one-transaction": 0.0, "lease": round(1.1 * ctx.scale, 3)}}


def overrun(ctx: Context) -> dict:
    article = {
        "lease": "both workers ran it and both finished it (no fence)",
        "lease-fenced": "one committed run, but both workers did three seconds of work",
        "lease-heartbeat": "one execution: only the heartbeat prevented the second",
    }
    timing = Timing(lease=2.0, poll=0.1, heartbeat=0.5)
    rows = []
    with Runner(ctx.database) as runner:
        for design in article:
            # Two workers, one job that outlives its lease; each worker takes one job, as in the article.
            schedule = Schedule(jobs=(JobSpec(1, duration=3.0),), design=design, workers=2, dequeues=1,
                                timing=timing, time_scale=ctx.scale)
            ctx.progress(f"overrun: {design}")
            h = runner.run(schedule)
            exs = _executions(h, 1)
            rows.append({"design": design, "executions": len(exs), "workers": len({e.worker for e in exs}),
                         "committed_runs": _runs(h, 1), "side_effects": sum(e.effects for e in exs),
                         "fenced_out": sum(1 for e in exs if e.fenced), "final_state": _job(h, 1)["status"],
                         "article": article[design]})
    return {"experiment": "overrun", "rows": rows,
            "article": "lease 2 s, job 3 s, second worker polling every 100 ms: the fence keeps one "
                       "committed run but both did the work; only the heartbeat prevented the second "
                       "execution",
            "time_scale": ctx.scale}
