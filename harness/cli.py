"""``python run.py``: the command line. The one place errors become exit codes.

Exit codes: 0 every property held, 1 a property violated, 2 usage error, 3 the harness itself
failed. A user's mistake is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
import traceback
from pathlib import Path

import properties
from faults.catalogue import parse_faults
from harness import report
from harness.errors import EXIT_HARNESS, EXIT_HELD, EXIT_USAGE, EXIT_VIOLATED, ChaosError, UsageError
from harness.schedule import load as load_schedule
from workers import DESIGNS, MODES, load_design

DEFAULT_TIME_SCALE = 0.5
DEFAULT_EXAMPLES = 10


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage errors: one line, exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="run.py", description=(
        "Chaos harness for PostgreSQL job workers. Searches for schedules of faults that break a "
        "design's guarantees. Subcommands: 'experiment NAME' (the article's measurements), 'bench'."))
    p.add_argument("--design", help=f"{' | '.join(DESIGNS)} | package.module:attr (default lease)")
    p.add_argument("--faults", default="", help="comma-separated faults, e.g. crash,overrun (see --list-faults)")
    p.add_argument("--tenant-mode", help=f"{' | '.join(MODES)} (default local)")
    p.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, help="schedules to generate (default 10)")
    p.add_argument("--seed", type=int, help="Hypothesis seed, for a reproducible search")
    p.add_argument("--time-scale", type=float, default=None,
                   help=f"multiply every duration (the article's lease is 1 s; default {DEFAULT_TIME_SCALE})")
    p.add_argument("--workers", type=int, help="fix the number of workers (default: searched, 1-3)")
    p.add_argument("--postgres", default="local", help="local (default) | a DSN | docker[:IMAGE]")
    p.add_argument("--pg-bin", help="directory with initdb and postgres (local back end)")
    p.add_argument("--replay", metavar="FILE", help="run one saved schedule and check it")
    p.add_argument("--compare", action="store_true", help="the same schedules on several designs")
    p.add_argument("--designs", help="with --compare: comma-separated designs (default all five)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON (format in the README)")
    p.add_argument("--junit", metavar="FILE", help="write one JUnit test case per property")
    p.add_argument("--out", default="chaos-out", help="where counterexample schedules are saved (default ./chaos-out)")
    p.add_argument("--list-faults", action="store_true", help="list the fault catalogue and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("-v", "--verbose", action="count", default=0, help="supervisor logs on stderr (-vv: debug)")
    return p


def _terminated(signum, frame):
    # SIGTERM unwinds like Ctrl-C does, so every `finally` runs: workers killed, server stopped,
    # temp directory removed (the janitor would do it too, but a clean exit says so itself).
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        if argv and argv[0] == "experiment":
            from harness import experiments

            return experiments.main(argv[1:])
        if argv and argv[0] == "bench":
            from harness import bench

            return bench.main(argv[1:])
        args = parser().parse_args(argv)
        _logging(args)
        return _dispatch(args)
    except ChaosError as exc:
        print(f"pg-job-chaos: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("pg-job-chaos: interrupted; everything it started has been removed", file=sys.stderr)
        return 130
    except Exception:  # a bug of ours, not the user's: say so, with the traceback for the report
        traceback.print_exc()
        print("pg-job-chaos: the harness itself failed (above); please report it", file=sys.stderr)
        return EXIT_HARNESS


def _logging(args) -> None:
    level = logging.WARNING if args.verbose == 0 else logging.INFO if args.verbose == 1 else logging.DEBUG
    from harness import logs

    logs.setup(level)
    logging.getLogger("psycopg.pool").setLevel(max(level, logging.ERROR))


def _dispatch(args) -> int:
    from harness.postgres import provision
    from harness.runner import Runner

    if args.list_faults:
        from faults.catalogue import CATALOGUE

        for f in CATALOGUE.values():
            print(f"{f.name:<10} {f.kind:<10} {f.summary}")
        return EXIT_HELD
    # Every check of the user's input happens before anything is started.
    faults = parse_faults(args.faults)
    if args.examples < 1:
        raise UsageError("--examples must be at least 1")
    if args.time_scale is not None and args.time_scale <= 0:
        raise UsageError("--time-scale must be greater than 0")
    if args.workers is not None and not 1 <= args.workers <= 50:
        raise UsageError("--workers must be between 1 and 50")
    if args.tenant_mode is not None and args.tenant_mode not in MODES:
        raise UsageError(f"unknown tenant mode {args.tenant_mode!r}; modes: {', '.join(MODES)}")
    replay = load_schedule(args.replay) if args.replay else None
    designs = [d.strip() for d in (args.designs or ",".join(DESIGNS)).split(",") if d.strip()]
    for d in ([args.design] if args.design else []) + (designs if args.compare else []):
        load_design(d)
    progress = (lambda s: None) if args.quiet else (lambda s: print(f"  {s}", file=sys.stderr, flush=True))
    with provision(args.postgres, pg_bin=args.pg_bin) as database, Runner(database) as runner:
        progress(f"PostgreSQL: {database.server}")
        if replay is not None:
            return _replay(args, runner, replay)
        if args.compare:
            return _compare(args, runner, faults, designs, progress)
        return _search(args, runner, faults, progress)


def _replay(args, runner, schedule) -> int:
    changes = {}
    if args.design:
        changes["design"] = args.design
    if args.tenant_mode:
        changes["tenant_mode"] = args.tenant_mode
    if args.time_scale:
        changes["time_scale"] = args.time_scale
    schedule = schedule.replace(**changes)
    history = runner.run(schedule)
    results = properties.check(history)
    print(report.property_table(results, title=f"replay of {args.replay} on {schedule.design} ({schedule.tenant_mode})"))
    for n in report.notes_for(results):
        print(n)
    print("timeline:")
    print(report.timeline(history))
    _write(args, {"design": schedule.design, "tenant_mode": schedule.tenant_mode, "faults": schedule.faults(),
                  "replay": args.replay, "properties": report.results_json(results)},
           {schedule.design: results})
    return EXIT_VIOLATED if any(r.status == properties.VIOLATED for r in results.values()) else EXIT_HELD


def _search(args, runner, faults, progress) -> int:
    from harness.search import search

    design = args.design or "lease"
    mode = args.tenant_mode or "local"
    scale = args.time_scale or DEFAULT_TIME_SCALE
    names = ",".join(f.name for f in faults) or "none"
    progress(f"searching: design {design}, tenant mode {mode}, faults {names}, {args.examples} examples, "
             f"time scale {scale}")
    out = search(runner.run, faults=faults, design=design, tenant_mode=mode, examples=args.examples,
                 seed=args.seed, time_scale=scale, workers=args.workers, progress=progress)
    results = out.aggregate()
    print(report.property_table(results, title=(
        f"{design} ({mode}) under faults {names}: {len(out.runs)} runs in {out.seconds:.1f} s")))
    for n in report.notes_for(results):
        print(n)
    counter = None
    if out.counterexample is not None:
        counter = _show_counterexample(args, out, design, names)
    _write(args, {"design": design, "tenant_mode": mode, "faults": [f.name for f in faults],
                  "examples": args.examples, "seed": args.seed, "properties": report.results_json(results),
                  "counterexample": counter}, {design: results})
    return EXIT_VIOLATED if any(r.status == properties.VIOLATED for r in results.values()) else EXIT_HELD


def _show_counterexample(args, out, design: str, names: str) -> dict:
    ce = out.counterexample
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{design}-{names.replace(',', '-')}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(ce.schedule.to_json() + "\n")
    replay = f"python run.py --replay {path}"
    state = "FLAKY: the replay did not violate it again" if out.flaky else "replayed: violated again"
    budget = " (shrink budget spent: the smallest schedule observed)" if out.shrink_budget_spent else ""
    print(f"\nCounterexample{budget}: {len(ce.schedule.jobs)} jobs, {ce.schedule.workers} workers; "
          f"violates {', '.join(ce.violated)}; {state}")
    print(ce.schedule.to_json())
    print(f"saved to {path}\nreplay with: {replay}\n\ntimeline of that run:")
    print(report.timeline(ce.history))
    aggregate = out.aggregate()
    others = [n for n, r in aggregate.items() if r.status == "violated" and n not in ce.violated]
    for n in others:
        small = out.smallest_for(n)
        if small is not None:
            p = outdir / f"{path.stem}-{n}.json"
            p.write_text(small.schedule.to_json() + "\n")
            print(f"{n}: smallest schedule that violated it ({len(small.schedule.jobs)} jobs): {p}")
    return {"schedule": ce.schedule.to_dict(), "file": str(path), "replay": replay, "violated": ce.violated,
            "flaky": out.flaky}


def _compare(args, runner, faults, designs, progress) -> int:
    from harness.search import sample_schedules

    mode = args.tenant_mode or "local"
    scale = args.time_scale or DEFAULT_TIME_SCALE
    scheds = sample_schedules(faults=faults, design=designs[0], tenant_mode=mode, count=args.examples,
                              seed=args.seed, time_scale=scale, workers=args.workers)
    per_design = {}
    for d in designs:
        runs = []
        for i, s in enumerate(scheds, 1):
            h = runner.run(s.replace(design=d))
            runs.append(properties.check(h))
            bad = [n for n, r in runs[-1].items() if r.status == "violated"]
            progress(f"{d} {i}/{len(scheds)}: {'violated ' + ','.join(bad) if bad else 'all held'}")
        per_design[d] = properties.aggregate(runs)
    print(report.matrix(per_design))
    _write(args, {"faults": [f.name for f in faults], "tenant_mode": mode,
                  "schedules": [s.to_dict() for s in scheds],
                  "designs": {d: {"properties": report.results_json(r)} for d, r in per_design.items()}},
           per_design)
    violated = any(r.status == properties.VIOLATED for res in per_design.values() for r in res.values())
    return EXIT_VIOLATED if violated else EXIT_HELD


def _write(args, data: dict, suites: dict) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2, default=str) + "\n")
    if args.junit:
        report.junit(args.junit, suites)
