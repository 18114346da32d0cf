"""What ``search``, ``replay`` and ``compare`` do, given parsed arguments (see :mod:`harness.cli`).

Every check of the user's input happens before anything is started; each command returns its
exit code: 0 every property held, 1 a property violated.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import properties
from core.errors import EXIT_HELD, EXIT_VIOLATED, HarnessError, UsageError
from faults.catalogue import CATALOGUE, parse_faults
from harness import partition, report, scales, schedules
from harness.postgres import parse_spec, provision_for
from harness.postgres.local import DURABLE_SETTINGS
from harness.runner import Runner
from workers import DESIGNS, MODES, load_design


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
    return faults


def _list_faults() -> int:
    for f in CATALOGUE.values():
        print(f"{f.name:<10} {f.kind:<10} {f.summary}")
    return EXIT_HELD


def _settings(args, fault_names) -> dict[str, str] | None:
    """Durable server settings when a run may restart the server (see ``DURABLE_SETTINGS``); the
    restart fault needs the local server, which the harness can stop and start."""
    if "partition" in fault_names and (why := partition.available()):
        raise HarnessError(why)
    if "restart" not in fault_names:
        return None
    if parse_spec(args.postgres)[0] != "local":
        raise UsageError("the restart fault needs the local server (--postgres local): it stops and starts it")
    return dict(DURABLE_SETTINGS)


@contextlib.contextmanager
def _runner(args, progress, fault_names=()) -> Iterator[Runner]:
    with provision_for(args, settings=_settings(args, fault_names)) as database, Runner(database) as runner:
        progress(f"PostgreSQL: {database.server}")
        if database.settings:
            progress("server settings: " + ", ".join(f"{k}={v}" for k, v in database.settings.items()))
        yield runner


def _exit_code(results: dict) -> int:
    return EXIT_VIOLATED if any(r.status == properties.VIOLATED for r in results.values()) else EXIT_HELD


def replay(args, progress) -> int:
    _check_common(args)
    schedule = schedules.load(args.file)
    if args.design:
        load_design(args.design)
    if schedule.pg_version is not None and args.pg_version is None and args.pg_bin is None \
            and args.postgres == "local":
        args.pg_version = schedule.pg_version  # the server it failed on, unless the user picks another
    if schedule.pooler is not None and args.pooler is None:
        args.pooler = schedule.pooler
    with _runner(args, progress, schedule.faults()) as runner:
        return _replay(args, runner, schedule)


def search(args, progress) -> int:
    if args.list_faults:
        return _list_faults()
    _check_common(args)
    faults = _check_drawn(args)
    if args.design:
        load_design(args.design)
    with _runner(args, progress, [f.name for f in faults]) as runner:
        return _search(args, runner, faults, progress)


def compare(args, progress) -> int:
    if args.list_faults:
        return _list_faults()
    _check_common(args)
    faults = _check_drawn(args)
    designs = [d.strip() for d in (args.designs or ",".join(DESIGNS)).split(",") if d.strip()]
    for d in designs:
        load_design(d)
    with _runner(args, progress, [f.name for f in faults]) as runner:
        return _compare(args, runner, faults, designs, progress)


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
    print(report.property_table(results, title=f"replay of {args.file} on {schedule.design} ({schedule.tenant_mode})"))
    for n in report.notes_for(results):
        print(n)
    print("timeline:")
    print(report.timeline(history))
    _write(args, {"design": schedule.design, "tenant_mode": schedule.tenant_mode, "faults": schedule.faults(),
                  "replay": args.file, "server": history.server, "properties": report.results_json(results)},
           {schedule.design: results})
    return _exit_code(results)


def _search(args, runner, faults, progress) -> int:
    from harness.search import search

    design = args.design or "lease"
    mode = args.tenant_mode or "local"
    scale = args.time_scale or scales.SEARCH
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
        counter = _show_counterexample(args, out, design, names, runner.stamp)
    _write(args, {"design": design, "tenant_mode": mode, "faults": [f.name for f in faults],
                  "examples": args.examples, "seed": args.seed, "server": runner.database.environment(),
                  "properties": report.results_json(results),
                  "counterexample": counter}, {design: results})
    return _exit_code(results)


def _show_counterexample(args, out, design: str, names: str, stamp) -> dict:
    ce = out.counterexample
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{design}-{names.replace(',', '-')}-{time.strftime('%Y%m%d-%H%M%S')}.json"
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
    for n in others:
        small = out.smallest_for(n)
        if small is not None:
            p = outdir / f"{path.stem}-{n}.json"
            p.write_text(stamp(small.schedule).to_json() + "\n")
            print(f"{n}: smallest schedule that violated it ({len(small.schedule.jobs)} jobs): {p}")
    return {"schedule": saved.to_dict(), "file": str(path), "replay": replay, "violated": ce.violated,
            "flaky": out.flaky}


def _compare(args, runner, faults, designs, progress) -> int:
    from harness.search import sample_schedules

    mode = args.tenant_mode or "local"
    scale = args.time_scale or scales.SEARCH
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
