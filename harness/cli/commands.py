"""What ``search``, ``replay`` and ``compare`` do, given parsed arguments (see :mod:`harness.cli`).

Every check of the user's input happens before anything is started; each command returns its
exit code: 0 every property held, 1 a property violated.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from ...core.errors import EXIT_HELD, EXIT_VIOLATED, UsageError
from ...faults.catalogue import CATALOGUE, parse_faults
from ...properties import HELD, UNKNOWN, VIOLATED, Result, check
from ...workers import DESIGNS, MODES, load_design, parse_options
from .. import scales
from ..engine import schedules
from ..progress import finish
from ..report import html
from ..report import text as report
from ..session import runner_for, search_options, slot_count


def _check_common(args) -> None:
    if args.time_scale is not None and args.time_scale <= 0:
        raise UsageError("--time-scale must be greater than 0")
    if args.tenant_mode is not None and args.tenant_mode not in MODES:
        raise UsageError(f"unknown tenant mode {args.tenant_mode!r}; modes: {', '.join(MODES)}")


def _check_drawn(args):
    """The faults, once the drawing options are known good."""
    faults = parse_faults(args.faults)
    if args.examples < 1:
        raise UsageError("--examples must be at least 1")
    if args.workers is not None and not 1 <= args.workers <= 50:
        raise UsageError("--workers must be between 1 and 50")
    if args.budget is not None and args.budget <= 0:
        raise UsageError("--budget must be greater than 0 seconds")
    return faults


def _list_faults() -> int:
    for f in CATALOGUE.values():
        print(f"{f.name:<10} {f.kind:<10} {f.summary}")
    return EXIT_HELD


def _exit_code(args, results: dict, *, never_struck: list[str] = ()) -> int:
    """1 when a property was violated, or with ``--strict`` could not decide or an allowed fault
    struck in no run; else 0."""
    failing = {VIOLATED, UNKNOWN} if args.strict else {VIOLATED}
    undecided = [n for n, r in results.items() if r.status == UNKNOWN]
    if args.strict and undecided:
        print(f"--strict: {', '.join(undecided)} could not decide; the run fails")
    if args.strict and never_struck:
        print(f"--strict: {', '.join(never_struck)} struck in no run; the run fails")
        return EXIT_VIOLATED
    return EXIT_VIOLATED if any(r.status in failing for r in results.values()) else EXIT_HELD


def replay(args, progress) -> int:
    _check_common(args)
    schedule = schedules.load(args.file)
    options = parse_options(args.design_option) if args.design_option else None
    design = load_design(args.design or schedule.design,
                         schedule.design_options if options is None and not args.design else options)
    _check_scale(args, [design], schedule.time_scale)
    _check_versions(schedule, design)
    if schedule.pg_version is not None and args.pg_version is None and args.pg_bin is None \
            and args.postgres == "local":
        args.pg_version = schedule.pg_version  # the server it failed on, unless the user picks another
    if schedule.pooler is not None and args.pooler is None:
        args.pooler = schedule.pooler
    with runner_for(args, progress, schedule.faults()) as runner:
        return _replay(args, runner, schedule)


def search(args, progress) -> int:
    if args.list_faults:
        return _list_faults()
    _check_common(args)
    faults = _check_drawn(args)
    args.design_options = parse_options(args.design_option)
    _check_scale(args, [load_design(args.design or "lease", args.design_options)])
    options = search_options(args)  # an unreachable example database fails before anything starts
    names = [f.name for f in faults]
    with runner_for(args, progress, names, parallel=slot_count(args, names)) as runner:
        return _search(args, runner, faults, progress, {**options, **search_options(args, runner)})


def compare(args, progress) -> int:
    if args.list_faults:
        return _list_faults()
    _check_common(args)
    faults = _check_drawn(args)
    designs = [d.strip() for d in (args.designs or ",".join(DESIGNS)).split(",") if d.strip()]
    _check_scale(args, [load_design(d) for d in designs])
    options = search_options(args)
    names = [f.name for f in faults]
    with runner_for(args, progress, names, parallel=slot_count(args, names)) as runner:
        return _compare(args, runner, faults, designs, progress, {**options, **search_options(args, runner)})


def _check_scale(args, designs, default: float = scales.SEARCH) -> None:
    """A hosted library that cannot time below a second needs a larger time scale: the default is
    raised to it (and said); a smaller one given on the command line is a usage error."""
    floor = max((getattr(d, "min_time_scale", None) or 0.0 for d in designs), default=0.0)
    if not floor:
        return
    names = ", ".join(d.name for d in designs if (getattr(d, "min_time_scale", None) or 0.0) == floor)
    if args.time_scale is None:
        if default < floor:
            args.time_scale = floor
            print(f"time scale {floor:g}: {names} cannot honour its own intervals at a smaller one")
    elif args.time_scale < floor:
        raise UsageError(f"--time-scale {args.time_scale:g}: {names} needs at least {floor:g} "
                         "(it counts some of its intervals in whole seconds)")


def _check_versions(schedule, design) -> None:
    """Say so when the library a replay runs is not the version the schedule was saved with."""
    versions = getattr(design, "versions", None)
    now = dict(versions()) if callable(versions) else {}
    for lib, then in (schedule.libraries or {}).items():
        if lib in now and now[lib] != then:
            print(f"note: the schedule was saved with {lib} {then}; this replay runs {lib} {now[lib]}")


def _replay(args, runner, schedule) -> int:
    changes = {}
    if args.design:
        changes["design"], changes["design_options"] = args.design, {}
    if args.design_option:
        changes["design_options"] = parse_options(args.design_option)
    if args.tenant_mode:
        changes["tenant_mode"] = args.tenant_mode
    if args.time_scale:
        changes["time_scale"] = args.time_scale
    schedule = schedule.replace(**changes)
    history = runner.run(schedule)
    results = check(history)
    title = f"replay of {args.file} on {schedule.design} ({schedule.tenant_mode})"
    print(report.property_table(results, title=title))
    for n in report.notes_for(results):
        print(n)
    print("timeline:")
    print(report.timeline(history))
    _write(args, {"design": schedule.design, "tenant_mode": schedule.tenant_mode, "faults": schedule.faults(),
                  "replay": args.file, "server": history.server, "properties": report.results_json(results)},
           {schedule.design: results},
           page=lambda: {"title": title, "tables": [("properties", results)], "counterexamples": [html.counterexample(
               name="this replay", schedule_json=schedule.to_json(), file=args.file,
               replay=f"python run.py --replay {args.file}",
               violated=[n for n, r in results.items() if r.status == VIOLATED], history=history)]})
    return _exit_code(args, results)


def _search(args, runner, faults, progress, options: dict) -> int:
    from ..engine.search import search

    design = args.design or "lease"
    mode = args.tenant_mode or "local"
    scale = args.time_scale or scales.SEARCH
    names = ",".join(f.name for f in faults) or "none"
    progress(f"searching: design {design}, tenant mode {mode}, faults {names}, {args.examples} examples, "
             f"time scale {scale}")
    out = search(runner.run, faults=faults, design=design, tenant_mode=mode, examples=args.examples,
                 seed=args.seed, time_scale=scale, workers=args.workers, progress=progress,
                 design_options=args.design_options, **options)
    finish(progress)
    results = out.aggregate()
    no_strike = out.no_strike_point(faults)
    if no_strike:
        results = _no_strike(results)
    title = (f"{design} ({mode}) under faults {names}: {len(out.runs)} runs ({out.small_scope_runs} small-scope) "
             f"in {out.seconds:.1f} s")
    print(report.property_table(results, title=title))
    for n in report.notes_for(results):
        print(n)
    coverage = out.coverage()
    never = out.never_struck(faults, coverage)
    for line in report.coverage_lines(coverage, never, budget_spent=out.budget_spent):
        print(line)
    counter, shown = None, []
    if out.counterexample is not None:
        counter, shown = _show_counterexample(args, out, design, names, runner.stamp)
    _write(args, {"design": design, "tenant_mode": mode, "faults": [f.name for f in faults],
                  "examples": args.examples, "seed": args.seed, "server": runner.database.environment(),
                  "properties": report.results_json(results),
                  "counterexample": counter, "small_scope_runs": out.small_scope_runs,
                  "coverage": coverage, "never_struck": never, "budget_spent": out.budget_spent},
           {design: results},
           page=lambda: {"title": title, "tables": [("properties", results)], "counterexamples": [
               html.counterexample(name=name, schedule_json=run.schedule.to_json(), file=str(path),
                                   replay=f"python run.py --replay {path}", violated=run.violated,
                                   history=run.history) for name, run, path in shown]})
    if no_strike:
        print(f"NO FAULT COULD STRIKE: no execution of {design} reached a strike point in {len(out.runs)} runs "
              "(does its worker run the harness's job body? see workers/hosted.py); the run fails")
        return EXIT_VIOLATED
    return _exit_code(args, results, never_struck=never)


def _no_strike(results: dict) -> dict:
    """What held in a search where no fault could strike is unknown: nothing was put to the test."""
    return {n: r if r.status != HELD else Result(
        n, UNKNOWN, evidence="no fault could strike: no execution reached a strike point")
        for n, r in results.items()}


def _show_counterexample(args, out, design: str, names: str, stamp) -> tuple[dict, list]:
    """Print and save the counterexample (and the smallest schedule for each other violated
    property), each stamped with the server it ran on; returns its JSON and ``(name, run, saved
    path)`` of each schedule saved."""
    ce = out.counterexample
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    # A plug-in's spec is a path or module:attr: its file name keeps only the attribute's name.
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", design.rpartition(":")[2] or design).strip("-.") or "design"
    path = outdir / f"{stem}-{names.replace(',', '-')}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    saved = stamp(ce.schedule)  # with the server version and pooler it ran on: a replay uses them
    path.write_text(saved.to_json() + "\n")
    replay = f"python run.py --replay {path}"
    state = "FLAKY: the replay did not violate it again" if out.flaky else "replayed: violated again"
    budget = " (shrink budget spent: the smallest schedule observed)" if out.shrink_budget_spent else ""
    print(f"\nCounterexample{budget}: {len(ce.schedule.jobs)} jobs, {ce.schedule.workers} workers; "
          f"violates {', '.join(ce.violated)}; {state}")
    print(saved.to_json())
    print(f"saved to {path}\nreplay with: {replay}\n\ntimeline of that run:")
    print(report.timeline(ce.history))
    aggregate = out.aggregate()
    others = [n for n, r in aggregate.items() if r.status == "violated" and n not in ce.violated]
    shown = [("counterexample", ce, path)]
    for n in others:
        small = out.smallest_for(n)
        if small is not None:
            p = outdir / f"{path.stem}-{n}.json"
            p.write_text(stamp(small.schedule).to_json() + "\n")
            print(f"{n}: smallest schedule that violated it ({len(small.schedule.jobs)} jobs): {p}")
            shown.append((f"smallest schedule violating {n}", small, p))
    return {"schedule": saved.to_dict(), "file": str(path), "replay": replay, "violated": ce.violated,
            "flaky": out.flaky}, shown


def _compare(args, runner, faults, designs, progress, options: dict) -> int:
    from ..engine.compare import compare

    mode = args.tenant_mode or "local"
    scale = args.time_scale or scales.SEARCH
    c = compare(runner.run, designs=designs, faults=faults, tenant_mode=mode, examples=args.examples,
                seed=args.seed, time_scale=scale, workers=args.workers, progress=progress, **options)
    finish(progress)
    print(report.matrix(c.results, decided_by=c.decided_by))
    outdir = Path(args.out)
    files = []
    for i, deciding in enumerate(c.schedules, 1):
        outdir.mkdir(parents=True, exist_ok=True)
        path = outdir / f"compare-S{i}-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(runner.stamp(deciding.schedule).to_json() + "\n")
        files.append(str(path))
        print(f"S{i}: {deciding.origin}: {len(deciding.schedule.jobs)} jobs, {deciding.schedule.workers} workers, "
              f"faults {','.join(deciding.schedule.faults()) or 'none'}; replay: python run.py --replay {path} "
              f"--design DESIGN")
    _write(args, {"faults": [f.name for f in faults], "tenant_mode": mode,
                  "schedules": [d.schedule.to_dict() for d in c.schedules],
                  "origins": [d.origin for d in c.schedules], "files": files,
                  "designs": {d: {"properties": report.results_json(r),
                                  "decided_by": {n: i + 1 for n, i in c.decided_by[d].items()}}
                              for d, r in c.results.items()}},
           c.results,
           page=lambda: {"title": f"compare: faults {','.join(f.name for f in faults) or 'none'} ({mode})",
                         "matrix": c.results, "counterexamples": [
                             html.counterexample(name=f"S{i}: {d.origin}", schedule_json=d.schedule.to_json(),
                                                 file=path, replay=f"python run.py --replay {path}",
                                                 violated=d.run.violated, history=d.run.history)
                             for i, (d, path) in enumerate(zip(c.schedules, files, strict=True), 1)]})
    return max(_exit_code(args, res) for res in c.results.values())


def _write(args, data: dict, suites: dict, *, page=None) -> None:
    """``--json``, ``--junit`` and ``--html`` (*page* makes :func:`harness.html.write`'s arguments)."""
    if args.html and page is not None:
        print(f"HTML report: {html.write(args.html, **page())}")
    for f in (args.json, args.junit):
        if f:
            Path(f).parent.mkdir(parents=True, exist_ok=True)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2, default=str) + "\n")
    if args.junit:
        report.junit(args.junit, suites, strict=args.strict)
