"""``run.py corpus [CASE...]``: the real-bug corpus hunted, one case after another (issue 48).

Per case: the buggy version's environment (prepared when missing, :mod:`.envs`), the default seeded
search there until the case's property is violated or its budget ends, then the same search at the fixed
version (an open bug has none), which must hold it over the same budget in at least as many runs as the
buggy side needed. A version that cannot be installed here is refused with why; a case marked
``blocked`` is listed with why and not run. ``--prepare`` only prepares. Exit 0 when every case that ran
was found at its buggy version and held at its fixed one, 1 otherwise, 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import EXIT_HELD, EXIT_VIOLATED, UsageError
from .case import Case, load, load_dir
from .envs import prepare
from .hunt import Side, hunt_side
from .systems import SYSTEMS

__all__ = ["CORPUS", "Outcome", "add_parser", "command", "run_case"]

CORPUS = Path(__file__).resolve().parents[2] / "corpus"  # the repository's own cases
REPLAYS = 10  # the counterexample replayed this many times: its reproducibility
# --quick checks the whole path in the test suite (cases at the pinned versions, no environment to build)
# in under a minute: each case's search gets this budget, not its own, and one replay. It shows that the
# command runs, not that it finds: the corpus's figures are run.py corpus's and run.py bench --corpus's.
QUICK_REPLAYS = 1
QUICK_BUDGET = 15.0
DEFAULT_SEED = 1


@dataclass
class Outcome:
    """One case's result: ``status`` is ``blocked``, ``refused``, ``found`` (at the buggy version, and held
    or open at the fixed one), ``not found``, ``fixed violated``, ``fixed undecided`` or ``error``."""

    case: Case
    status: str = ""
    why: str = ""
    buggy: Side | None = None
    fixed: Side | None = None
    prepare_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in ("found", "blocked", "refused")

    def to_dict(self) -> dict:
        c = self.case
        return {"case": c.name, "system": c.system, "buggy_version": c.buggy, "fixed_version": c.fixed,
                "link": c.link, "summary": c.summary, "property": c.prop, "budget": c.budget,
                "status": self.status, "why": self.why, "prepare_seconds": round(self.prepare_seconds, 1),
                "buggy": self.buggy.to_dict() if self.buggy else None,
                "fixed": self.fixed.to_dict() if self.fixed else None}


def add_parser(sub, parents: Iterable[argparse.ArgumentParser]) -> None:
    """``run.py corpus``: the subcommand's arguments (see :mod:`harness.cli.parser`)."""
    p = sub.add_parser("corpus", parents=list(parents), help="rediscover reported bugs at their versions",
                       description="Search each case's buggy version until its property is violated, then "
                                   "its fixed version, which must hold it (docs/reference/corpus.md).")
    p.add_argument("cases", nargs="*", metavar="CASE", help="case names or .toml files (default: every case)")
    p.add_argument("--cases", dest="folder", metavar="DIR", help="a folder of cases (default: corpus/)")
    p.add_argument("--prepare", action="store_true", help="only install the cases' versions (cached)")
    p.add_argument("--quick", action="store_true",
                   help=f"only the cases marked quick, each for {QUICK_BUDGET:g} s (--budget) with "
                        f"{QUICK_REPLAYS} replay: the command's own check, not its figures")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help=f"the searches' seed (default {DEFAULT_SEED})")
    p.add_argument("--replays", type=int, metavar="N",
                   help=f"replays of each counterexample (default {REPLAYS}; --quick {QUICK_REPLAYS})")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="every case's budget instead of its own")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--out", default="chaos-out/corpus", help="searches' reports and schedules (default "
                   "./chaos-out/corpus)")
    p.set_defaults(command=command)


def select(args) -> list[Case]:
    """The cases the command line names (all of the folder's when none), ``--quick``'s when asked."""
    folder = Path(args.folder) if args.folder else CORPUS
    if not args.cases:
        chosen = load_dir(folder)
    else:
        by_name = {c.name: c for c in load_dir(folder)} if folder.is_dir() else {}
        chosen = []
        for name in args.cases:
            if name.endswith(".toml"):
                chosen.append(load(name))
            elif name in by_name:
                chosen.append(by_name[name])
            else:
                raise UsageError(f"no case {name!r} in {folder}; cases: {', '.join(by_name) or 'none'}")
    if args.quick:
        chosen = [c for c in chosen if c.quick]
        if not chosen:
            raise UsageError(f"--quick: no case in {folder} is marked quick = true")
    return chosen


def _server(args) -> list[str]:
    """The server flags the user gave, passed on to each search."""
    out = []
    if args.postgres != "local":
        out += ["--postgres", args.postgres]
    if args.pg_bin:
        out += ["--pg-bin", args.pg_bin]
    if args.pg_version is not None:
        out += ["--pg-version", str(args.pg_version)]
    return out


def run_case(case: Case, *, seed: int, replays: int, budget: float | None, out_dir: Path,
             server: list[str], progress=lambda s: None) -> Outcome:
    """Hunt *case*: the buggy side, then (when it was found and the bug has a fix) the fixed side."""
    o = Outcome(case)
    if case.blocked is not None:
        o.status = "blocked"
        o.why = case.blocked
        return o
    system = SYSTEMS[case.system]
    envs = {}
    for version in (case.buggy, case.fixed):
        if version is None:
            continue
        p = prepare(system, version, progress)
        o.prepare_seconds += p.seconds
        if p.env is None:
            o.status = "refused"
            o.why = f"{case.system} {version}: {p.refused}"
            return o
        envs[version] = p.env
    seconds = budget if budget is not None else case.budget
    progress(f"{case.name}: searching {case.system} {case.buggy} for {case.prop} ({seconds:g} s budget)")
    o.buggy = hunt_side(case, envs[case.buggy], case.buggy, seed=seed, budget=seconds, replays=replays,
                        out_dir=out_dir, server=server, label="buggy")
    if o.buggy.verdict == "error":
        o.status = "error"
        o.why = f"at {case.buggy}: {o.buggy.error}"
        return o
    if o.buggy.verdict != "violated":
        o.status = "not found"
        o.why = f"{case.prop} {o.buggy.verdict} in {o.buggy.runs} runs ({o.buggy.seconds:.0f} s)"
        return o
    if case.fixed is None:
        o.status = "found"
        o.why = "open: no fixed version"
        return o
    progress(f"{case.name}: the same search at {case.system} {case.fixed}")
    o.fixed = hunt_side(case, envs[case.fixed], case.fixed, seed=seed, budget=seconds, replays=1,
                        out_dir=out_dir, server=server, label="fixed")
    if o.fixed.verdict == "error":
        o.status = "error"
        o.why = f"at {case.fixed}: {o.fixed.error}"
    elif o.fixed.verdict == "violated":
        o.status = "fixed violated"
        o.why = f"{case.prop} violated at {case.fixed} too"
    elif o.fixed.verdict != "held" or o.fixed.runs < (o.buggy.first_runs or 0):
        o.status = "fixed undecided"
        o.why = (f"{case.prop} {o.fixed.verdict} at {case.fixed} in {o.fixed.runs} runs, the buggy side "
                 f"needed {o.buggy.first_runs}")
    else:
        o.status = "found"
    return o


def _figures(o: Outcome) -> tuple[str, str, str]:
    b = o.buggy
    f = o.fixed
    found = (f"{b.first_seconds:.0f} s / {b.first_runs} runs" if b is not None and b.first_seconds is not None
             else "-")
    held = ("n/a (open)" if o.case.fixed is None else
            f"{f.verdict} in {f.runs} runs" if f is not None else "-")
    replays = f"{b.reproduced}/{b.replays}" if b is not None and b.replays else "-"
    return found, held, replays


def render(outcomes: list[Outcome], wall: float) -> str:
    """The corpus table, then each found case's shrunk schedule and replay command."""
    rows = [("case", "versions", "status", "found in", "fixed", "replays")]
    for o in outcomes:
        c = o.case
        rows.append((c.name, f"{c.system} {c.buggy} -> {c.fixed or 'none'}", o.status, *_figures(o)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for o in outcomes:
        if o.why:
            lines.append(f"{o.case.name}: {o.why}")
    for o in outcomes:
        b = o.buggy
        if b is not None and b.schedule is not None:
            lines += [f"\n{o.case.name} ({o.case.link}): {o.case.summary}",
                      f"counterexample at {o.case.system} {o.case.buggy}, replayed {b.replays} times, "
                      f"violated again in {b.reproduced}:", json.dumps(b.schedule),
                      f"replay with: {b.replay}"]
    lines.append(f"\n{len(outcomes)} cases in {wall:.0f} s")
    return "\n".join(lines)


def command(args, progress) -> int:
    replays = args.replays if args.replays is not None else QUICK_REPLAYS if args.quick else REPLAYS
    if replays < 1:
        raise UsageError("--replays must be at least 1")
    if args.budget is not None and args.budget <= 0:
        raise UsageError("--budget must be greater than 0 seconds")
    cases = select(args)
    if args.list:
        for c in cases:
            state = f"blocked: {c.blocked}" if c.blocked else f"{c.prop}, {c.budget:g} s"
            print(f"{c.name}: {c.system} {c.buggy} -> {c.fixed or 'none'}; {state}; {c.summary}")
        return EXIT_HELD
    if args.prepare:
        for c in cases:
            for version in (c.buggy, c.fixed):
                if version is None or c.blocked:
                    continue
                p = prepare(SYSTEMS[c.system], version, progress)
                what = (f"refused: {p.refused}" if p.env is None else
                        f"{'built' if p.built else 'ready'} ({p.env.label}, {p.seconds:.0f} s)")
                print(f"{c.system} {version}: {what}")
        return EXIT_HELD  # a refusal is an answer (its case is listed with why), not a failure
    budget = args.budget if args.budget is not None else QUICK_BUDGET if args.quick else None
    t0 = time.monotonic()
    outcomes = [run_case(c, seed=args.seed, replays=replays, budget=budget, out_dir=Path(args.out),
                         server=_server(args), progress=progress) for c in cases]
    wall = time.monotonic() - t0
    out = sys.stderr if args.json == "-" else sys.stdout
    print(render(outcomes, wall), file=out)
    if args.json:
        doc = json.dumps({"seed": args.seed, "replays": replays, "wall_seconds": round(wall, 1),
                          "cases": [o.to_dict() for o in outcomes]}, indent=2, default=str)
        if args.json == "-":
            sys.stdout.write(doc + "\n")
        else:
            Path(args.json).write_text(doc + "\n")
    return EXIT_HELD if all(o.ok for o in outcomes) else EXIT_VIOLATED
