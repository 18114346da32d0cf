"""What ``search``, ``replay`` and ``compare`` do, given parsed arguments (see :mod:`harness.cli.parser`).

Every check of the user's input happens before anything is started. Each command builds one
:class:`~harness.report.result.Report` (as the pytest plugin does), prints it, writes the files asked
for and returns its exit code: 0 every property held, 1 a property violated (or the run failed for a
reason the report states). The parsed arguments are read, never written back.
"""

from __future__ import annotations

import dataclasses
import sys

from ...core.errors import EXIT_HELD, UsageError
from ...core.schedule import JobSpec, Schedule
from ...core.workload import WORKLOADS
from ...faults.catalogue import CATALOGUE, parse_faults
from ...properties import OPT_IN, check, gate
from ...workers import DESIGNS, MODES, load_design, parse_options
from .. import scales
from ..engine import schedules
from ..progress import finish
from ..report import build, files, text
from ..report.result import Report
from ..session import runner_for, search_options, slot_count


def _check_common(args) -> tuple[str, ...]:
    """The common checks; returns the gate (the properties whose violation fails the run)."""
    if args.time_scale is not None and args.time_scale <= 0:
        raise UsageError("--time-scale must be greater than 0")
    if getattr(args, "grace", None) is not None and args.grace < 0:
        raise UsageError("--grace must be 0 or more (article seconds between SIGTERM and SIGKILL)")
    if args.tenant_mode is not None and args.tenant_mode not in MODES:
        raise UsageError(f"unknown tenant mode {args.tenant_mode!r}; modes: {', '.join(MODES)}")
    return gate(args.fail_on, args.allow)


def _check_drawn(args):
    """The common checks and the drawing options': the gate, the faults and their names."""
    chosen = _check_common(args)
    faults = parse_faults(args.faults)
    if args.examples < 1:
        raise UsageError("--examples must be at least 1")
    if args.workers is not None and not 1 <= args.workers <= 50:
        raise UsageError("--workers must be between 1 and 50")
    if args.budget is not None and args.budget <= 0:
        raise UsageError("--budget must be greater than 0 seconds")
    return chosen, faults, [f.name for f in faults]


def _check_workload(spec: str | None) -> None:
    """``--workload NAME[:N]``: a known workload, and N (the flood's largest size) a positive integer."""
    if spec is None:
        return
    kind, colon, cap = spec.partition(":")
    if kind not in WORKLOADS:
        raise UsageError(f"unknown workload {kind!r}; workloads: {', '.join(WORKLOADS)} (NAME or NAME:N)")
    if colon and not (cap.isdigit() and int(cap) >= 1):
        raise UsageError(f"--workload {spec}: N, the flood's largest size, must be a positive integer")


def _workload_gate(args, chosen: tuple[str, ...], declared: bool) -> tuple[str, ...]:
    """A declared tenant workload (``--workload``, or a replayed schedule's) puts the groups it lets be
    judged (``properties.OPT_IN``: fairness) in the default gate; ``--fail-on`` given, that stays."""
    if not declared or args.fail_on:
        return chosen
    return gate(",".join((*gate(), *OPT_IN)), args.allow)


def _list_faults() -> int:
    width = max(len(f.name) for f in CATALOGUE.values())
    for f in CATALOGUE.values():
        print(f"{f.name:<{width}} {f.kind:<10} {f.summary}")
    return EXIT_HELD


def _stdout(args):
    """Human output: standard output, or standard error when ``--json -`` takes standard output."""
    return sys.stderr if getattr(args, "json", None) == "-" else sys.stdout


def _finish(args, report: Report) -> int:
    """Print *report*, write its files, say why it fails; its exit code."""
    out = _stdout(args)
    print(text.render(report), file=out)
    for line in files.write(report, json_path=args.json, junit_path=args.junit, html_path=args.html):
        print(line, file=out)
    for line in report.failures():
        print(line, file=out)
    return report.exit_code()


def replay(args, progress) -> int:
    chosen = _check_common(args)
    schedule = schedules.load(args.file)
    options = parse_options(args.design_option) if args.design_option else None
    design = load_design(args.design or schedule.design,
                         schedule.design_options if options is None and not args.design else options)
    scale = _time_scale(args, [design], schedule.time_scale)
    notes = _version_notes(schedule, design)
    server = args.server  # the server it failed on (its version, its pooler), unless the user picks another
    if schedule.pg_version is not None and server.pg_version is None and server.pg_bin is None \
            and server.kind == "local":
        server = dataclasses.replace(server, pg_version=schedule.pg_version)
    if schedule.pooler is not None and server.pooler is None:
        server = dataclasses.replace(server, pooler=schedule.pooler)
    if schedule.replica is not None and server.replica is None:  # the topology it failed on
        server = dataclasses.replace(server, replica=schedule.replica)
    changes = {}
    if args.design:
        changes["design"] = args.design
        changes["design_options"] = {}
    if args.design_option:
        changes["design_options"] = parse_options(args.design_option)
    if args.tenant_mode:
        changes["tenant_mode"] = args.tenant_mode
    if args.time_scale or scale != schedule.time_scale:
        changes["time_scale"] = scale
    if args.grace is not None:
        changes["timing"] = dataclasses.replace(schedule.timing, grace=args.grace)
    schedule = schedule.replace(**changes)
    chosen = _workload_gate(args, chosen, schedule.workload is not None)
    with runner_for(server, progress, schedule.faults(), designs=[design]) as runner:
        history = runner.run(schedule)
    report = build.replay_report(history, check(history), schedule, args.file, strict=args.strict,
                                 notes=notes, gate=chosen)
    return _finish(args, _with_timing(report, [design], schedule))


def search(args, progress) -> int:
    if args.list_faults:
        return _list_faults()
    chosen, faults, names = _check_drawn(args)
    _check_workload(args.workload)
    if args.replays < 1:
        raise UsageError("--replays must be at least 1")
    chosen = _workload_gate(args, chosen, args.workload is not None)
    design = args.design or "lease"
    handle = load_design(design, parse_options(args.design_option))  # built once: runner, slots, search
    scale = _time_scale(args, [handle])
    options = search_options(args)  # an unreachable example database fails before anything starts
    with runner_for(args.server, progress, names, parallel=slot_count(args.server, names, args.parallel),
                    designs=[handle]) as runner:
        from ..engine.search import search

        mode = args.tenant_mode or "local"
        progress(f"searching: design {design}, tenant mode {mode}, faults {','.join(names) or 'none'}, "
                 f"{args.examples} examples, time scale {scale}")
        out = search(runner.run, faults=faults, design=handle, tenant_mode=mode, examples=args.examples,
                     seed=args.seed, time_scale=scale, workers=args.workers, progress=progress,
                     gate=chosen, workload=args.workload, stop_at_first=args.stop_at_first,
                     small_scope=args.small_scope, replays=args.replays,
                     **{**options, **search_options(args, runner)})
        finish(progress)
        report = build.search_report(out, faults=faults, design=design, tenant_mode=mode,
                                     examples=args.examples, seed=args.seed,
                                     server=runner.database.environment(), stamp=runner.stamp,
                                     out_dir=args.out, strict=args.strict, gate=chosen)
    return _finish(args, _with_timing(report, [handle], Schedule(jobs=(JobSpec(1),), time_scale=scale)))


def compare(args, progress) -> int:
    if args.list_faults:
        return _list_faults()
    chosen, faults, names = _check_drawn(args)
    if args.workload is not None:  # a compare replays each design's counterexamples on the others: not yet
        raise UsageError("--workload is for search; compare does not draw tenant workloads yet")
    designs = [d.strip() for d in (args.designs or ",".join(DESIGNS)).split(",") if d.strip()]
    loaded = [load_design(d) for d in designs]
    scale = _time_scale(args, loaded)
    options = search_options(args)
    with runner_for(args.server, progress, names, parallel=slot_count(args.server, names, args.parallel),
                    designs=loaded) as runner:
        from ..engine.compare import compare

        mode = args.tenant_mode or "local"
        c = compare(runner.run, designs=loaded, faults=faults, tenant_mode=mode, examples=args.examples,
                    seed=args.seed, time_scale=scale, workers=args.workers, progress=progress, gate=chosen,
                    **{**options, **search_options(args, runner)})
        finish(progress)
        report = build.compare_report(c, faults=faults, tenant_mode=mode, stamp=runner.stamp,
                                      out_dir=args.out, strict=args.strict, gate=chosen)
    return _finish(args, _with_timing(report, loaded, Schedule(jobs=(JobSpec(1),), time_scale=scale)))


def _with_timing(report: Report, designs, schedule) -> Report:
    """*report* with the documented ratios of each hosted library that *schedule*'s timing cannot keep
    (``workers/hosted/timing.py``): its notes (the human report) and ``timing`` in its JSON, by design. Each
    run's history has them among its notes too (the supervisor's first)."""
    timing = {}
    for d in designs:
        notes = d.timing_notes(schedule)
        if notes:
            timing[d.name] = notes
    report.notes = [*report.notes, *(n for notes in timing.values() for n in notes if n not in report.notes)]
    report.data = {**report.data, "timing": timing}
    return report


def _time_scale(args, designs, default: float = scales.SEARCH) -> float:
    """The run's time scale: ``--time-scale``, else *default* -- raised (and said) to the floor of a
    hosted library whose intervals cannot keep their documented ratios below it (``min_time_scale``,
    workers/hosted/timing.py); a smaller one given is a usage error."""
    floor = max((d.min_time_scale or 0.0 for d in designs), default=0.0)
    if not floor:
        return args.time_scale or default
    names = ", ".join(d.name for d in designs if (d.min_time_scale or 0.0) == floor)
    if args.time_scale is None:
        if default < floor:
            print(f"time scale {floor:g}: {names} cannot honour its own intervals at a smaller one",
                  file=_stdout(args))
            return floor
        return default
    if args.time_scale < floor:
        raise UsageError(f"--time-scale {args.time_scale:g}: {names} needs at least {floor:g} (below it, an "
                         "interval it counts in whole seconds or cannot set breaks its documented ratio: "
                         "docs/reference/adapters.md)")
    return args.time_scale


def _version_notes(schedule, design) -> list[str]:
    """A note when the library a replay runs is not the version the schedule was saved with."""
    now = design.versions()
    return [f"note: the schedule was saved with {lib} {then}; this replay runs {lib} {now[lib]}"
            for lib, then in (schedule.libraries or {}).items() if lib in now and now[lib] != then]
