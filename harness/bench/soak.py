"""``python run.py soak``: the harness's own false-alarm rate (issue 46).

Every "no false alarm" figure before this was a search of a design we wrote, on a quiet machine, once.
The soak runs the designs whose guarantees are established -- each a :class:`Control`: a design (a
built-in one, or a hosted library with the options that give it the guarantee: awa's ``run_lease``
fence, DBOS's and pg-boss's ``finish=transaction``), the faults it is searched under and the properties
it must keep under them (:data:`CONTROLS`, the table ``docs/findings/benchmarks.md`` lists, each row
written before it soaked) -- beside busy loops of its own
(:mod:`harness.bench.busy`, two by default on this project's 2-core machines), round after round with
new seeds, until its minutes are spent. A violation of a kept property is a **false alarm**: the harness
said a design broke a guarantee it keeps -- a timing violation at a small lease included, since a user
would read it the same way.

Each control's first round is the small-scope pass's first level (:func:`harness.engine.smallscope.
schedules`: every fault at every point, the same schedules each time); every later round draws
``examples`` schedules with a new seed (:func:`harness.engine.search.sample_schedules`). Nothing is
shrunk. Every run is saved as one line of ``DIR/runs.jsonl`` (control, seed, label, seconds, the
schedule, every verdict, the evidence of each false alarm) and each false alarm's schedule as a file
``run.py replay`` takes (``DIR/false-alarms/``); the counts are read back from the saved lines
(:func:`tally`), never kept in memory: ``run.py soak --tally DIR`` reprints them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ...core.errors import UsageError
from ...core.schedule import POINTS
from ...faults import parse_faults
from ...properties import VIOLATED, check, gate
from ...workers import load_design
from ..engine import smallscope
from ..engine.search import sample_schedules
from ..postgres import provision
from ..runner import Runner
from .busy import BusyLoops

RUNS = "runs.jsonl"
FALSE_ALARMS = "false-alarms"
EVERY = tuple(gate())  # every property a run is judged on by default


@dataclass(frozen=True)
class Control:
    """A design searched under *faults* that must keep every property of *keeps* (a false alarm else)."""

    name: str
    design: str
    faults: str
    time_scale: float
    keeps: tuple[str, ...]
    why: str  # where the guarantee is established (a test, a finding)
    options: dict[str, str] = field(default_factory=dict)
    tenant_mode: str = "local"


# Hazard: docs/findings/benchmarks.md lists this table (tests/unit/test_soak.py keeps the two the same);
# a row changed after a soak ran changes what its saved runs' counts mean.
CONTROLS = (
    Control("lease-outbox", "lease-outbox", "raise,sql-error,crash,overrun,hang,kill,terminate", 0.5, EVERY,
            "tests/chaos/test_search.py: every run without a pause holds every property"),
    Control("lease-heartbeat", "lease-heartbeat", "raise,sql-error,crash,overrun,hang", 0.2,
            ("single-commit", "attempts-counted", "bounded-attempts", "tenant-isolation", "terminal-states"),
            "tests/chaos/test_search.py KEPT: the fence-guarded properties, whatever the machine"),
    # Hosted libraries (added 2026-12-07, before they soaked): each keeps only what its tests held under
    # every one of its faults; the rest of what they lose is at-least-once or a finding of its own.
    Control("awa-fenced", "awa", "raise,crash,overrun,pause,kill", 0.36,
            ("library-one-finish", "attempts-counted", "tenant-isolation"),
            "tests/chaos/test_awa.py: the run_lease fence (awa's own, in queue storage) -- "
            "library-one-finish, attempts-counted, tenant-isolation held after a raise, a crash loop, an "
            "overrun, a pause; kill: docs/findings/libraries.md, awa's kill row (a replay: every property "
            "held but horizon)",
            options={"storage": "queue"}),
    Control("dbos-transaction", "dbos", "raise,crash", 0.25, ("single-commit", "done-means-committed"),
            "tests/chaos/test_dbos.py: finish=transaction held both after a crash at after-insert and a "
            "transient raise; docs/reference/adapters.md (Finish paths): single-commit in all 43 runs of a "
            "crash search",
            options={"finish": "transaction"}),
    Control("pg-boss-transaction", "pg-boss", "raise,crash", 1.0, ("single-commit", "done-means-committed"),
            "tests/chaos/test_pgboss.py: finish=transaction held both after a crash at after-insert and a "
            "transient raise; docs/reference/adapters.md (Finish paths): single-commit in all 58 runs of a "
            "crash search",
            options={"finish": "transaction"}),
)
BY_NAME = {c.name: c for c in CONTROLS}


def controls(names: str | None) -> list[Control]:
    """The controls *names* (comma-separated; None: all) names, or a usage error listing the known ones."""
    if not names:
        return list(CONTROLS)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown:
        raise UsageError(f"--controls: unknown {', '.join(map(repr, unknown))}; "
                         f"controls: {', '.join(BY_NAME)}")
    return [BY_NAME[n] for n in wanted]


def _rounds(c: Control, points: tuple[str, ...], seed: int, examples: int):
    """(seed or None, label, schedule) forever: the small-scope pass's first level, then drawn rounds."""
    faults = parse_faults(c.faults)
    for label, s in smallscope.schedules(faults=faults, design=c.design, tenant_mode=c.tenant_mode,
                                         time_scale=c.time_scale, points=points):
        yield None, label, s
    k = 0
    while True:
        drawn = sample_schedules(faults=faults, design=c.design, tenant_mode=c.tenant_mode, count=examples,
                                 seed=seed + k, time_scale=c.time_scale, points=points)
        for s in drawn:
            yield seed + k, "", s
        k += 1


def soak(runner: Runner, chosen: list[Control], out_dir: Path, *, minutes: float, seed: int,
         examples: int, progress: Callable[[str], None] = lambda s: None) -> None:
    """Run *chosen* in turn, one schedule each, until *minutes* are spent; every run saved in *out_dir*."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / FALSE_ALARMS).mkdir(exist_ok=True)
    handles = {c.name: load_design(c.design, c.options) for c in chosen}
    streams = {c.name: _rounds(c, tuple(p for p in POINTS if p in handles[c.name].points), seed, examples)
               for c in chosen}
    end = time.monotonic() + minutes * 60
    n = 0
    with (out_dir / RUNS).open("a") as log:
        while time.monotonic() < end:
            for c in chosen:
                if time.monotonic() >= end:
                    break
                drawn_seed, label, s = next(streams[c.name])
                if c.options:
                    s = s.replace(design_options=dict(c.options))
                t = time.monotonic()
                results = check(runner.run(s, design=handles[c.name]))
                seconds = time.monotonic() - t
                # a property not judged on this run (a failover one without --replica) is absent
                alarms = {k: r.evidence for k in c.keeps if (r := results.get(k)) and r.status == VIOLATED}
                n += 1
                if alarms:
                    (out_dir / FALSE_ALARMS / f"{c.name}-{n}.json").write_text(s.to_json())
                log.write(json.dumps({"control": c.name, "seed": drawn_seed, "label": label,
                                      "seconds": round(seconds, 3), "schedule": s.to_dict(),
                                      "verdicts": {k: r.status for k, r in results.items()},
                                      "false_alarms": alarms}) + "\n")
                log.flush()
                progress(f"soak {n}: {c.name} {label or f'seed {drawn_seed}'} -> "
                         f"{'FALSE ALARM ' + ','.join(alarms) if alarms else 'kept'} ({seconds:.1f} s)")


@dataclass
class Tally:
    runs: int = 0
    seconds: float = 0.0
    false_alarms: int = 0  # runs with at least one
    by_property: dict[str, int] = field(default_factory=dict)


def tally(out_dir: Path) -> dict[str, Tally]:
    """Per control, read back from the saved runs (``DIR/runs.jsonl``)."""
    path = out_dir / RUNS
    if not path.is_file():
        raise UsageError(f"{path}: no saved soak runs there")
    out: dict[str, Tally] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        t = out.setdefault(r["control"], Tally())
        t.runs += 1
        t.seconds += r["seconds"]
        if r["false_alarms"]:
            t.false_alarms += 1
            for k in r["false_alarms"]:
                t.by_property[k] = t.by_property.get(k, 0) + 1
    return out


def print_tally(counts: dict[str, Tally], out: TextIO) -> None:
    print(f"{'control':<20} {'runs':>6} {'hours':>6} {'false alarms':>13}  by property", file=out)
    for name, t in counts.items():
        by = ", ".join(f"{k} {n}" for k, n in sorted(t.by_property.items())) or "-"
        print(f"{name:<20} {t.runs:>6} {t.seconds / 3600:>6.2f} {t.false_alarms:>13}  {by}", file=out)
    total = sum(t.runs for t in counts.values())
    print(f"{'all':<20} {total:>6} {sum(t.seconds for t in counts.values()) / 3600:>6.2f} "
          f"{sum(t.false_alarms for t in counts.values()):>13}", file=out)


def add_parser(sub, parents: Iterable[argparse.ArgumentParser]) -> None:
    """``run.py soak``: the subcommand's arguments (see :mod:`harness.cli.parser`)."""
    p = sub.add_parser("soak", parents=list(parents), help="the harness's own false-alarm rate",
                       description="Search the controls (designs whose guarantees are established) beside "
                                   "busy loops, new seeds each round, every run saved; a kept property "
                                   "violated is a false alarm. Exit 0 none, 1 any.")
    p.add_argument("--minutes", type=float, default=10.0, help="how long to soak (default 10)")
    p.add_argument("--out", metavar="DIR", default="soak-out", help="where the runs are saved (appended)")
    p.add_argument("--controls", metavar="NAMES",
                   help=f"comma-separated, of: {', '.join(BY_NAME)} (default all)")
    p.add_argument("--busy", type=int, default=2, metavar="N", help="busy loops beside the soak (default 2)")
    p.add_argument("--seed", type=int, help="the first round's seed (default: from the clock, printed)")
    p.add_argument("--examples", type=int, default=5, metavar="N",
                   help="schedules a drawn round (default 5)")
    p.add_argument("--tally", action="store_true",
                   help="only read back DIR's saved runs and print the counts")
    p.set_defaults(command=command)


def command(args, progress) -> int:
    out_dir = Path(args.out)
    if not args.tally:
        if args.minutes <= 0 or args.examples < 1 or not 0 <= args.busy <= 64:
            raise UsageError("--minutes must be > 0, --examples >= 1, --busy 0..64")
        chosen = controls(args.controls)
        seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
        print(f"soak: {', '.join(c.name for c in chosen)}; seed {seed}; {args.busy} busy loops; "
              f"{args.minutes:g} min; runs saved in {out_dir / RUNS}")
        with BusyLoops(args.busy), provision(args.server) as database, Runner(database) as runner:
            soak(runner, chosen, out_dir, minutes=args.minutes, seed=seed, examples=args.examples,
                 progress=progress)
    counts = tally(out_dir)
    print_tally(counts, sys.stdout)
    return 1 if any(t.false_alarms for t in counts.values()) else 0
