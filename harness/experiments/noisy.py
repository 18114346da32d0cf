"""The noisy neighbour (issue 38): one tenant's flood ahead of small tenants' jobs, per design.

The experiment makes its own jobs: tenant 1 (the dataset's largest, 20,000 invoices) enqueues a flood
of ``--jobs`` jobs (10,000; 200 with ``--quick``) ahead of every other job; then small tenants (the
dataset's smallest: 100, 99, ...; 200 invoices and fewer) enqueue a few jobs each, interleaved. Each
design runs the same schedule through the harness (its supervisor, forked workers, no fault):

* ``lease`` -- the article's FIFO claim (``order by id``): the flood is handed out first;
* ``lease-round-robin`` -- one tenant at a time in turn;
* ``lease-tenant-cap`` -- at most :data:`CAP` live leases per tenant (of :data:`WORKERS` workers).

Figures, from the run's history (:func:`waits`, :func:`jain`; never hard-coded):

* **wait** of a job: its first execution's start minus the moment the queue began to be served (the
  first start of any job). Every job is queued before the first worker starts, so this is enqueue to
  first start without the workers' fork and connect. Per design: the small tenants' jobs' p50, p99 and
  max (pooled), and the flood's p99;
* **Jain's index** of jobs *completed* per tenant (flood and small tenants alike) while every tenant
  was backlogged: from the first start to the earliest moment any tenant's last job started (its queue
  emptied); ``(sum x)^2 / (n * sum x^2)``, 1 when every tenant completed as many, 1/n when one did all;
* **throughput**: jobs done per second, first start to last finish.
"""

from __future__ import annotations

from pathlib import Path

from ...core.schedule import JobSpec, Schedule, Timing
from ...core.waits import jain, percentile
from ..runner import Runner
from .common import Context, plot

DESIGNS = ("lease", "lease-round-robin", "lease-tenant-cap")
WORKERS = 4
CAP = 2  # lease-tenant-cap's cap here: the flood keeps half the workers
FLOOD_TENANT = 1
DURATION = 0.005  # article seconds of work per job (scaled by the time scale)


def schedule_jobs(flood: int, small: int, per_small: int) -> tuple[JobSpec, ...]:
    """The flood (tenant 1) first, then *per_small* jobs of each of *small* small tenants (100, 99, ...)
    interleaved, as many tenants enqueuing at once."""
    jobs = [JobSpec(i, tenant=FLOOD_TENANT, duration=DURATION) for i in range(1, flood + 1)]
    tenants = [100 - k for k in range(small)]
    for n in range(per_small * small):
        jobs.append(JobSpec(flood + n + 1, tenant=tenants[n % small], duration=DURATION))
    return tuple(jobs)


def waits(history, tenant_of: dict[int, int | None]) -> dict:
    """From a run's history: ``wait`` (job -> seconds from the first start of any job to the job's own
    first start), ``done`` (job -> its first successful execution's end), ``t0`` (the first start)."""
    first: dict[int, float] = {}
    done: dict[int, float] = {}
    for e in history.executions():
        first[e.job] = min(first.get(e.job, e.start), e.start)
        if e.outcome == "ok" and e.end is not None:
            done[e.job] = min(done.get(e.job, e.end), e.end)
    t0 = min(first.values()) if first else 0.0
    return {"wait": {j: t - t0 for j, t in first.items() if j in tenant_of}, "first": first, "done": done,
            "t0": t0}


def backlogged_jain(w: dict, tenant_of: dict[int, int | None]) -> float | None:
    """Jain's index of jobs completed per tenant between the first start and the moment the first
    tenant's queue emptied (its last job's first start)."""
    last_start: dict = {}
    for job, t in w["first"].items():
        key = tenant_of.get(job)
        last_start[key] = max(last_start.get(key, t), t)
    if len(last_start) != len(set(tenant_of.values())):  # a tenant never started: backlogged throughout
        end = max(w["first"].values(), default=w["t0"])
    else:
        end = min(last_start.values())
    completed = dict.fromkeys(set(tenant_of.values()), 0)
    for job, t in w["done"].items():
        if t <= end and job in tenant_of:
            completed[tenant_of[job]] += 1
    return jain(list(completed.values()))


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def noisy_neighbour(ctx: Context) -> dict:
    flood = ctx.jobs or ctx.pick(10_000, 200)
    small = ctx.pick(10, 4)
    per_small = ctx.pick(20, 5)
    jobs = schedule_jobs(flood, small, per_small)
    tenant_of = {j.id: j.tenant for j in jobs}
    # the run must never end by its deadline: far beyond what the flood needs at one job per worker
    timing = Timing(deadline=max(60.0, len(jobs) * 0.05))
    rows = []
    series = {}
    with Runner(ctx.database) as runner:
        for design in DESIGNS:
            options = {"cap": str(CAP)} if design == "lease-tenant-cap" else {}
            sched = Schedule(jobs=jobs, workers=WORKERS, design=design, time_scale=ctx.scale, timing=timing,
                             design_options=options)
            ctx.progress(f"noisy-neighbour: {design} ({len(jobs)} jobs, {WORKERS} workers)")
            h = runner.run(sched, design=runner.handle(design, options))
            w = waits(h, tenant_of)
            small_w = [s for j, s in w["wait"].items() if tenant_of[j] != FLOOD_TENANT]
            flood_w = [s for j, s in w["wait"].items() if tenant_of[j] == FLOOD_TENANT]
            ends = list(w["done"].values())
            span = max(ends) - w["t0"] if ends else 0.0
            label = f"{design} (cap {CAP})" if options else design
            index = backlogged_jain(w, tenant_of)
            rows.append({"design": label, "done": f"{len(w['done'])} of {len(jobs)}",
                         "small_p50_ms": _ms(percentile(small_w, 50)),
                         "small_p99_ms": _ms(percentile(small_w, 99)),
                         "small_max_ms": _ms(max(small_w, default=None)),
                         "flood_p99_ms": _ms(percentile(flood_w, 99)),
                         "jain_backlogged": None if index is None else round(index, 3),
                         "jobs_per_s": round(len(ends) / span, 1) if span > 0 else None,
                         "ended_by": h.ended_by, "article": "-"})
            series[label] = sorted(small_w)
    result = {"experiment": "noisy-neighbour", "rows": rows,
              "article": "not measured: the article names fairness between tenants as the next question",
              "flood": flood, "small_tenants": small, "jobs_per_small_tenant": per_small,
              "workers": WORKERS, "time_scale": ctx.scale,
              "note": f"tenant {FLOOD_TENANT}'s {flood} jobs queued ahead of {small} small tenants' "
                      f"{per_small} each; wait = first start - the queue's first start; Jain's index of "
                      "jobs completed per tenant while every tenant was backlogged"}
    if ctx.plot_dir is not None:
        result["plots"] = [plot(Path(ctx.plot_dir) / "noisy-neighbour.png", lambda ax: _draw(ax, series))]
    return result


def _draw(ax, series: dict) -> None:
    """The small tenants' waits as a distribution: the share of their jobs started by each wait."""
    for label, ranked in series.items():
        if ranked:
            ax.step(ranked, [(i + 1) / len(ranked) for i in range(len(ranked))], where="post", label=label)
    ax.set_xscale("symlog", linthresh=0.01)  # FIFO's waits are the whole flood, the fair ones' a few laps
    ax.set_xlabel("wait: first start after the queue's first start (s, logarithmic above 0.01)")
    ax.set_ylabel("share of the small tenants' jobs started")
    ax.set_title("the noisy neighbour: small tenants' waits behind one tenant's flood")
    ax.legend()
