"""The article's measurements as runnable experiments: ``python run.py experiment NAME``.

Each experiment is a scripted schedule plus a measurement (3, 4, 5 run the harness's own
designs, faults and supervisor; 1 and 2 use the tenant modes' pools; 6, 7, 8 measure PostgreSQL
itself) and returns ``{"experiment", "rows", "article", ...}``: our figures, never hard-coded,
beside the article's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harness.errors import ChaosError
from harness.experiments.common import Context, print_to_stderr, table

NAMES: tuple[str, ...] = ("leak", "reset-cost", "poison", "crash", "overrun", "vacuum", "horizon", "rls-queue")

_RUNNERS = {  # name -> (module, function)
    "leak": ("tenants", "leak"),
    "reset-cost": ("tenants", "reset_cost"),
    "poison": ("runs", "poison"),
    "crash": ("runs", "crash"),
    "overrun": ("runs", "overrun"),
    "vacuum": ("vacuum", "vacuum"),
    "horizon": ("horizon", "horizon"),
    "rls-queue": ("rls_queue", "rls_queue"),
}

__all__ = ["NAMES", "main", "render", "run_experiment"]


def run_experiment(name: str, database, *, quick: bool, jobs: int | None = None, plot_dir: Path | None = None,
                   progress=print_to_stderr, time_scale: float | None = None) -> dict:
    """Run one experiment against a provisioned database; a JSON-serialisable result."""
    import importlib

    if name not in _RUNNERS:
        from harness.errors import UsageError

        raise UsageError(f"unknown experiment {name!r}; experiments: {', '.join(NAMES)}, all")
    module, function = _RUNNERS[name]
    fn = getattr(importlib.import_module(f"harness.experiments.{module}"), function)
    ctx = Context(database, quick=quick, jobs=jobs, plot_dir=Path(plot_dir) if plot_dir else None,
                  progress=progress, time_scale=time_scale)
    t0 = time.perf_counter()
    result = fn(ctx)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["quick"] = quick
    result["server_version"] = getattr(database, "server_version", None)
    return result


def render(result: dict) -> str:
    """A plain-text report of one result: the table (with its "article" column), then the summary."""
    out = [f"== {result['experiment']} ({'quick' if result.get('quick') else 'full scale'}, "
           f"{result.get('seconds', '?')} s) =="]
    out.append(table(result.get("rows", [])))
    for s in result.get("series", []):
        curve = " ".join(f"{x:g}" if x is not None else "-" for x in s.get("block_median_ms", []))
        after = s.get("after_release_ms")
        out.append(f"  {s['variant']:<20} block medians (ms): {curve}"
                   + (f" | after release: {after:g}" if after is not None else ""))
    out.append(f"article: {result.get('article', '-')}")
    if result.get("note"):
        out.append(f"note: {result['note']}")
    for p in result.get("plots", []):
        out.append(f"plot: {p}")
    return "\n".join(out)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run.py experiment",
                                description="Reproduce one of the article's measurements (or all).")
    p.add_argument("name", metavar="NAME", help=f"one of: {', '.join(NAMES)}, all")
    p.add_argument("--quick", action="store_true", help="smaller counts, for CI")
    p.add_argument("--json", metavar="FILE", type=Path, help="write the results as JSON")
    p.add_argument("--plot", metavar="DIR", type=Path, help="write PNG charts (horizon, reset-cost, vacuum)")
    p.add_argument("--postgres", default="local", metavar="SPEC", help="local (default), docker[:IMAGE] or a DSN")
    p.add_argument("--pg-bin", metavar="DIR", help="directory of the PostgreSQL server binaries")
    p.add_argument("--jobs", type=int, metavar="N", help="job count (horizon: queued jobs; vacuum: short jobs)")
    p.add_argument("--time-scale", type=float, metavar="X",
                   help="multiply the article's durations (default 1, 0.25 with --quick)")
    return p


def main(argv: list[str]) -> int:
    argv = list(argv)
    if argv and argv[0] == "experiment":
        argv = argv[1:]
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    names = list(NAMES) if args.name == "all" else [args.name]
    if args.name != "all" and args.name not in NAMES:
        print(f"unknown experiment {args.name!r}; experiments: {', '.join(NAMES)}, all", file=sys.stderr)
        return 2
    if (args.jobs is not None and args.jobs < 10) or (args.time_scale is not None and args.time_scale <= 0):
        print("--jobs must be at least 10 and --time-scale greater than 0", file=sys.stderr)
        return 2
    from harness.postgres import provision

    results: dict[str, dict] = {}
    try:
        with provision(args.postgres, pg_bin=args.pg_bin) as database:
            print_to_stderr(f"experiments on {database.server}")
            for name in names:
                result = run_experiment(name, database, quick=args.quick, jobs=args.jobs, plot_dir=args.plot,
                                        time_scale=args.time_scale)
                results[name] = result
                print(render(result), flush=True)
                print(flush=True)
    except ChaosError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json is not None:
        payload = results[names[0]] if args.name != "all" else {"experiments": results}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2, default=str))
    return 0
