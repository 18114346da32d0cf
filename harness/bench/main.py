"""``python run.py bench``: the figures the issues ask for, printed, never asserted.

* database reset time (median of 50);
* fault-free examples per second (5 jobs, 2 workers);
* harness overhead per fault-free job against a bare psycopg loop running the same SQL on the same
  database, one process, no supervisor (goal: at most 1.10x; median of 5 alternating pairs);
* where a fault-free example's time goes (``harness/bench/profile.py``);
* per-job latency and transactions per job of ``lease-heartbeat`` and ``lease-outbox``
  (``harness/bench/cost.py``);
* time to the first counterexample and to the end of shrinking, per acceptance case, and per planted
  bug: seconds and runs until the first violation of its property (``--planted``: only those).
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from pathlib import Path

from ...core.schedule import JobSpec, Schedule
from ...faults import parse_faults
from ...workers import load_design
from .. import scales
from ..engine.search import search
from ..postgres import dataset as db
from ..postgres import provision
from ..runner import Runner
from . import fairness as bench_fairness
from . import findings as bench_findings
from . import libraries as bench_libraries
from . import matrix as bench_matrix
from . import profile
from .cost import bare_loop, design_cost, per_job_ratio

CASES = [  # (design, faults, tenant mode) from the acceptance list of the search issue
    ("one-transaction", "crash", "local"), ("one-transaction", "raise", "local"),
    ("one-transaction-handler", "crash", "local"), ("lease", "overrun", "local"), ("lease", "crash", "local"),
    ("lease-fenced", "overrun", "local"), ("lease-heartbeat", "pause", "local"), ("lease", "", "session"),
    ("lease", "", "reset-no-autocommit"),
]

COST_DESIGNS = ("lease-heartbeat", "lease-outbox")  # the recommendation, and what the outbox costs on top


def proxy_overhead(runner, database, jobs: int, lease: float, out) -> None:
    """The bare loop straight to the server (or pooler) and through a fault proxy (the network
    faults' path), alternating, same run: the proxy's cost per job."""
    from psycopg import conninfo

    from ..net.proxy import Proxies

    target = conninfo.conninfo_to_dict(database.worker_dsn)
    # a parsed DSN's values are text (conninfo_to_dict types them as it takes them: str | int | None)
    host = str(target.get("host", "127.0.0.1"))
    port = int(str(target.get("port", 5432)))
    proxies = Proxies(host, port, 1)
    via = conninfo.make_conninfo(database.worker_dsn, host="127.0.0.1", port=str(proxies.ports[1]))
    unprepared = {"prepare_threshold": None} if database.pooler else {}
    pairs = []
    try:
        for _ in range(3):
            per = {}
            for label, dsn in (("direct", database.worker_dsn), ("proxy", via)):
                runner.prepare(Schedule(jobs=tuple(JobSpec(i, tenant=(i % 100) + 1, duration=0.0)
                                                   for i in range(1, jobs + 1))))
                per[label] = bare_loop(dsn, jobs, lease, **unprepared)
            pairs.append((per["proxy"] - per["direct"], per["direct"], per["proxy"]))
    finally:
        proxies.close()
    extra, direct, proxied = sorted(pairs)[1]
    print(f"per job through the fault proxy ({jobs} jobs, bare loop, median of 3 alternating pairs): "
          f"{proxied * 1000:.3f} ms against {direct * 1000:.3f} ms without: +{extra * 1000:.3f} ms "
          f"({proxied / direct:.2f}x)", file=out)


def pooler_overhead(runner, database, jobs: int, lease: float, out) -> None:
    """The bare loop straight to the server and through the pooler, alternating, same database and
    run: the pooler's cost per job. prepare_threshold=None: psycopg's prepared statements break
    behind transaction pooling (see the README)."""
    pairs = []
    for _ in range(3):
        per = {}
        for label, dsn in (("direct", database.direct_worker_dsn), ("pooler", database.worker_dsn)):
            runner.prepare(Schedule(jobs=tuple(JobSpec(i, tenant=(i % 100) + 1, duration=0.0)
                                               for i in range(1, jobs + 1))))
            per[label] = bare_loop(dsn, jobs, lease, prepare_threshold=None)
        pairs.append((per["pooler"] - per["direct"], per["direct"], per["pooler"]))
    extra, direct, pooled = sorted(pairs)[1]
    print(f"per job through {database.pooler} ({jobs} jobs, bare loop, median of 3 alternating pairs): "
          f"{pooled * 1000:.3f} ms against {direct * 1000:.3f} ms direct: +{extra * 1000:.3f} ms "
          f"({pooled / direct:.2f}x)", file=out)


def add_parser(sub, parents) -> None:
    """``run.py bench``: the subcommand's arguments (see :mod:`harness.cli.parser`)."""
    p = sub.add_parser("bench", parents=parents, help="print the figures the issues ask for",
                       description="Benchmarks: printed, never asserted.")
    p.add_argument("--quick", action="store_true", help="fewer repetitions, no search cases")
    p.add_argument("--examples", type=int, default=10, help="examples per search case (default 10)")
    p.add_argument("--planted", action="store_true",
                   help="only each planted bug's time to first counterexample (harness/bench/planted.py)")
    p.add_argument("--libraries", action="store_true",
                   help="only the hosted queue libraries beside lease-heartbeat (harness/bench/libraries.py)")
    p.add_argument("--matrix", metavar="DIR",
                   help="with --libraries: instead, one compare matrix of every hosted library beside "
                        "lease-heartbeat and lease-outbox, grouped by time scale, saved in DIR "
                        "(harness/bench/matrix.py)")
    p.add_argument("--matrix-examples", type=int, default=3, metavar="N",
                   help="with --matrix: examples a design (default 3)")
    p.add_argument("--matrix-budget", type=float, default=600.0, metavar="SECONDS",
                   help="with --matrix: seconds of new schedules each design's search starts at most "
                        "(default 600)")
    p.add_argument("--corpus", action="store_true",
                   help="only the whole real-bug corpus, with its wall time (as the corpus subcommand)")
    p.set_defaults(command=command)


def corpus_figures(args, progress, out) -> int:
    """Every case of ``corpus/`` hunted as ``run.py corpus`` hunts it: the table, and the wall time."""
    from ..corpus.case import load_dir
    from ..corpus.command import CORPUS, REPLAYS, render, run_case

    t0 = time.monotonic()
    outcomes = [run_case(c, seed=1, replays=REPLAYS, budget=None, out_dir=Path("chaos-out/corpus"), server=[],
                         progress=progress) for c in load_dir(CORPUS)]
    wall = time.monotonic() - t0
    print(render(outcomes, wall), file=out)
    print(f"the whole corpus: {len(outcomes)} cases, wall time {wall:.0f} s", file=out)
    return 0


def command(args, progress) -> int:
    # reset-no-autocommit makes the pool warn once per job, by design
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    out = sys.stdout
    scale = scales.BENCH
    if args.corpus:
        return corpus_figures(args, progress, out)
    if args.libraries and args.matrix:
        bench_matrix.figures(bench_libraries.installed(out), out, root=Path(args.matrix),
                             examples=args.matrix_examples, budget=args.matrix_budget)
        return 0
    if args.libraries:
        libs = bench_libraries.installed(out)  # built once; the runner uses these
        with provision(args.server) as database, Runner(database, libs) as runner:
            print(f"PostgreSQL: {database.server}", file=out)
            bench_libraries.figures(runner, libs, out, examples=args.examples, quick=args.quick)
            bench_findings.figures(runner, out)  # the finding pages too slow for the suite (cost=bench)
        return 0
    if args.planted:
        with provision(args.server) as database, Runner(database) as runner:
            print(f"PostgreSQL: {database.server}", file=out)
            profile.first_counterexamples(runner, out, args.examples, scale)
        return 0
    if not args.server.pooler:  # slots need databases of their own, a pooler names one
        with provision(args.server) as database:
            _parallel_figures(database, out, scale, quick=args.quick)
    with provision(args.server) as database, Runner(database) as runner:
        print(f"PostgreSQL: {database.server}", file=out)
        resets = [db.reset(runner.admin) for _ in range(10 if args.quick else 50)]
        print(f"database reset (delete from jobs, job_runs, ...; a truncate every {db.DEAD_ROWS} rows): "
              f"median {statistics.median(resets) * 1000:.2f} ms",
              file=out)

        five = Schedule(jobs=tuple(JobSpec(i, tenant=i) for i in range(1, 6)), workers=2, design="lease",
                        time_scale=scale)
        n = 10 if args.quick else 20
        t0 = time.perf_counter()
        steps = [profile.timed_run(runner, five)[1] for _ in range(n)]
        print(f"fault-free examples per second (5 jobs, 2 workers, lease; {n} runs): "
              f"{n / (time.perf_counter() - t0):.2f}", file=out)
        profile.print_phases([s for s in steps if s is not None], out, "those examples")

        jobs = 200 if args.quick else 1000
        sched = Schedule(jobs=tuple(JobSpec(i, tenant=(i % 100) + 1, duration=0.0)
                                    for i in range(1, jobs + 1)),
                         workers=1, design="lease", time_scale=scale)
        per_job_ratio(runner, database, sched, out)

        if database.pooler is not None:
            pooler_overhead(runner, database, jobs, sched.seconds(sched.timing.lease), out)
        proxy_overhead(runner, database, jobs, sched.seconds(sched.timing.lease), out)
        jobs = 100 if args.quick else 500
        print(f"\nper job, fault-free, no supervisor ({jobs} jobs, 1 worker, time scale {scale:g}):",
              file=out)
        for design in COST_DESIGNS:
            c = design_cost(runner, database.admin_dsn, database.worker_dsn, design, jobs=jobs,
                            time_scale=scale)
            print(f"  {design:<16} latency {c['latency_ms']:.2f} ms per job (one execution, median "
                  f"{c['execution_ms']:.2f} ms), {c['transactions']:.2f} transactions per job", file=out)
        bench_fairness.figures(runner, database, out, quick=args.quick, time_scale=scale)  # issue 38 item 3

        if not args.quick:
            print(f"\nsearch cases (time scale {scale:g}, seed 1):", file=out)
            for design, faults, mode in CASES:
                _search_case(runner, out, design, faults, mode, None, args.examples, scale)
            profile.first_counterexamples(runner, out, args.examples, scale)
    return 0


PARALLEL_CASE = ("lease-heartbeat", "crash,pause,overrun")  # the small-scope pass: 24 schedules


def _parallel_figures(database, out, scale: float, *, quick: bool) -> None:
    """Schedules per minute of one small-scope pass at N = 1, 2, 4, 8 slots, and whether any slot
    count judged a schedule differently from N = 1 (a false alarm the parallelism caused)."""
    from ..slots import Slots

    design, faults = PARALLEL_CASE
    handle = load_design(design)  # built once; each slot inherits it
    print(f"\nparallel examples: the small-scope pass of {design} under {faults} (time scale {scale:g})",
          file=out)
    baseline = None
    base_rate = None
    for n in (1, 2) if quick else (1, 2, 4, 8):
        with Slots(database, n, [handle]) as slots, Runner(database, [handle]) as runner:
            t0 = time.perf_counter()
            res = search(runner.run, faults=parse_faults(faults), design=handle, tenant_mode="local",
                         examples=1, seed=1, time_scale=scale, run_many=slots.run_many, parallel=n)
            seconds = time.perf_counter() - t0
        verdicts = {r.label: sorted(r.violated) for r in res.runs if r.label}
        baseline = baseline or verdicts
        differ = sorted(k for k in verdicts if verdicts[k] != baseline.get(k))
        rate = 60 * res.small_scope_runs / seconds
        base_rate = base_rate or rate
        print(f"  N={n}: {res.small_scope_runs} schedules in {seconds:5.1f} s = {rate:5.1f}/min "
              f"({rate / base_rate:.1f}x); verdicts differing from N=1: {', '.join(differ) or 'none'}",
              file=out)


def _search_case(runner, out, design: str, faults: str, mode: str, prop: str | None, examples: int,
                 scale: float) -> None:
    res = search(runner.run, faults=parse_faults(faults), design=runner.handle(design), tenant_mode=mode,
                 examples=examples, seed=1, time_scale=scale)
    if prop is not None:
        hit = next((r for r in res.runs if prop in r.violated), None)
        first = f"{sum(r.seconds for r in res.runs[:res.runs.index(hit) + 1]):.1f} s" if hit else "NOT FOUND"
        smallest = res.smallest_for(prop)  # a run when there is a hit
        size = len(smallest.schedule.jobs) if smallest is not None else "-"
    else:
        first = f"{res.first_failure_seconds:.1f} s" if res.first_failure_seconds is not None else "none"
        size = len(res.counterexample.schedule.jobs) if res.counterexample else "-"
    per_minute = 60 * len(res.runs) / res.seconds if res.seconds else 0
    print(f"  {design.rpartition(':')[2]:<26} {faults or '-':<8} {prop or mode:<20} "
          f"first counterexample {first:>9}, "
          f"{res.small_scope_runs} small-scope + {examples} examples + shrink {res.seconds:6.1f} s, "
          f"{len(res.runs):3} runs ({per_minute:.0f}/min), shrunk to {size} jobs", file=out)
    if res.statement_points:  # what the pass struck between (smallscope.ranked): a missed race shows here
        print("      between statements: " + ", ".join(f"{p}{'' if bound else ' (no job)'}"
                                                      for p, bound in res.statement_points), file=out)
