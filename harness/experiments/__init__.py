"""The article's measurements as runnable experiments: ``python run.py experiment NAME``.

Each experiment is a scripted schedule plus a measurement (3, 4, 5 run the harness's own
designs, faults and supervisor; 1 and 2 use the tenant modes' pools; 6, 7, 8 measure PostgreSQL
itself) and returns ``{"experiment", "rows", "article", ...}``: our figures, never hard-coded,
beside the article's.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.errors import UsageError
from .. import scales
from ..progress import step
from .common import Context, print_to_stderr, table

if TYPE_CHECKING:
    from ..postgres import Database

NAMES: tuple[str, ...] = ("leak", "reset-cost", "poison", "crash", "overrun", "vacuum", "horizon",
                          "rls-queue", "failover", "noisy-neighbour")

_RUNNERS = {  # name -> (module, function)
    "leak": ("tenants", "leak"),
    "reset-cost": ("tenants", "reset_cost"),
    "poison": ("runs", "poison"),
    "crash": ("runs", "crash"),
    "overrun": ("runs", "overrun"),
    "vacuum": ("vacuum", "vacuum"),
    "horizon": ("horizon", "horizon"),
    "rls-queue": ("rls_queue", "rls_queue"),
    "failover": ("failover", "failover"),  # on replicated pairs of its own (issue 37)
    "noisy-neighbour": ("noisy", "noisy_neighbour"),  # issue 38: fairness between tenants
}

DIRECT = ("vacuum", "horizon", "rls-queue")  # measure the server itself: never through a pooler

__all__ = ["NAMES", "add_parser", "command", "render", "run_experiment"]


def run_experiment(name: str, database: Database, *, quick: bool, jobs: int | None = None,
                   plot_dir: Path | None = None, progress=print_to_stderr,
                   time_scale: float | None = None) -> dict:
    """Run one experiment against a provisioned database; a JSON-serialisable result."""
    if name not in _RUNNERS:
        raise UsageError(f"unknown experiment {name!r}; experiments: {', '.join(NAMES)}, all")
    module, function = _RUNNERS[name]
    fn = getattr(importlib.import_module(f".{module}", __name__), function)
    ctx = Context(database, quick=quick, jobs=jobs, plot_dir=Path(plot_dir) if plot_dir else None,
                  progress=progress, time_scale=time_scale)
    t0 = time.perf_counter()
    result = fn(ctx)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["quick"] = quick
    result["server_version"] = database.server_version
    result["server"] = database.server
    if database.pooler and name in DIRECT:
        result["note"] = ((result.get("note") or "") + f" (measured straight to the server, not through "
                          f"{database.pooler}: it measures PostgreSQL itself)").strip()
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


def add_parser(sub, parents) -> None:
    """``run.py experiment NAME``: the subcommand's arguments (see :mod:`harness.cli.parser`)."""
    p = sub.add_parser("experiment", parents=parents, help="reproduce one of the article's measurements",
                       description="Reproduce one of the article's measurements (or all).")
    p.add_argument("name", metavar="NAME", choices=(*NAMES, "all"), help=f"one of: {', '.join(NAMES)}, all")
    p.add_argument("--quick", action="store_true", help="smaller counts, for CI")
    p.add_argument("--json", metavar="FILE", type=Path, help="write the results as JSON")
    p.add_argument("--plot", metavar="DIR", type=Path,
                   help="write PNG charts (horizon, reset-cost, vacuum, noisy-neighbour)")
    p.add_argument("--html", metavar="FILE", type=Path,
                   help="write one self-contained page: each report and its curves as inline images")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="job count (horizon: queued jobs; vacuum: short jobs; noisy-neighbour: the flood)")
    p.add_argument("--time-scale", type=float, metavar="X",
                   help=f"multiply the article's durations (default {scales.EXPERIMENT:g}, "
                        f"{scales.EXPERIMENT_QUICK:g} with --quick)")
    p.set_defaults(command=command)


def command(args, progress) -> int:
    """Run the experiments *args* names; print each result; exit code 0 (a measurement has no verdict)."""
    from ..postgres import provision

    if args.jobs is not None and args.jobs < 10:
        raise UsageError("--jobs must be at least 10")
    if args.time_scale is not None and args.time_scale <= 0:
        raise UsageError("--time-scale must be greater than 0")
    names = list(NAMES) if args.name == "all" else [args.name]
    results: dict[str, dict] = {}
    with contextlib.ExitStack() as stack:
        plot_dir = args.plot
        if args.html is not None and plot_dir is None:  # the page needs the curves; they go inline
            plot_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pgjc-plots-")))
        with provision(args.server, progress=progress) as database:
            progress(f"experiments on {database.server}")
            for i, name in enumerate(names):
                step(progress, f"experiment {name} ({i + 1} of {len(names)})", done=i, total=len(names))
                results[name] = run_experiment(name, database, quick=args.quick, jobs=args.jobs,
                                               plot_dir=plot_dir, time_scale=args.time_scale,
                                               progress=progress)
                print(render(results[name]), flush=True)
                print(flush=True)
        if args.html is not None:
            from ..report import html

            page = html.write(args.html, title=f"experiments: {', '.join(names)}",
                              texts=[(n, render(r)) for n, r in results.items()],
                              images=[html.image(p, f"{n}: {Path(p).name}")
                                      for n, r in results.items() for p in r.get("plots", [])])
            print(f"HTML report: {page}")
    if args.json is not None:
        payload = results[names[0]] if args.name != "all" else {"experiments": results}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2, default=str))
    return 0
