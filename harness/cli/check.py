"""``pg-job-chaos check-design DESIGN``: does the adapter let the harness observe?

Positive controls for a design (a hosted adapter above all), before any search trusts it: a few
small runs on the ordinary runner (:meth:`harness.runner.Runner.run`, as ``replay`` runs one
schedule) -- fault-free twice (3 jobs on 1 and on 2 workers), then once per fault class with that
one fault on job 1 of 2 jobs on 2 workers (:data:`JOB_FAULTS` on their first execution,
:data:`SUPERVISOR_FAULTS` as events, each at its catalogue point when the design reaches it, else
at the design's first point) -- and after each run what any correct adapter must show:

* ``states``: ``final_states`` gave one row for every job of the schedule, status one of
  :data:`workers.hosted.STATES` (no job missing, none twice, no id the schedule lacks);
* ``attempts``: an int for every job, >= 1 for a job that ended done (fault-free: every job; a job
  left hanging may read 0 where the design counts an attempt when it commits: not judged here);
* ``body``: the job body logged ``started`` (fault-free: every job, and every job ends ``done``;
  with a fault: the job that carries it);
* ``struck``: the execution log (a job fault) or the supervisor's injected list (a supervisor
  fault) has the fault's record for job 1 at its point;
* ``quiescent``: a fault-free run ended quiescent (not stalled, not at its deadline);
* ``setting``, ``lease``, ``finish-time`` (fault-free runs): what the design declares is what its code
  does (:mod:`core.misdeclared`: the tenant setting its own tenant code sets is the declared
  ``tenant_setting``; a declared ``lease_seconds`` gives seconds where the harness asks; a success
  ``accepted_finishes`` dates on the database clock is after its body's last statement).

The design's guarantees are not judged (a design may lose a job to a crash: ``search`` says so);
only whether the harness can see what happened. An exception the design's own code raised in the
runner's process (install, enqueue, final_states) fails the run's checks; anything else raised is
the harness's (exit 3). Exit 0 every check held, 1 one failed (the adapter is wrong), 2 usage error.
"""

from __future__ import annotations

import argparse
import inspect
import traceback
from pathlib import Path

from ...core import misdeclared
from ...core.coverage import fault_fates
from ...core.errors import EXIT_HELD, EXIT_VIOLATED, ChaosError, UsageError
from ...core.events import EndedBy, LogEvent
from ...core.schedule import Event, JobSpec, Schedule
from ...faults.catalogue import CATALOGUE
from ...properties.strategies import dequeue_budget
from ...workers import load_design, parse_options
from ...workers.hosted import STATES
from ..progress import finish, step
from ..session import runner_for
from .commands import _time_scale

COMMAND = "check-design"
JOB_FAULTS = ("raise", "crash", "hang")  # each strikes the job's first execution only (strikes 1)
SUPERVISOR_FAULTS = ("kill", "pause")
FAULT_FREE_WORKERS = (1, 2)
MAX_ATTEMPTS = 3


def add_parser(sub, parents) -> argparse.ArgumentParser:
    p = sub.add_parser(COMMAND, parents=parents,
                       help="check that a design's adapter lets the harness observe it",
                       description="Positive controls for a design: fault-free runs and one run per fault "
                                   "class, each checked for what any correct adapter must show (every job "
                                   "mapped to a state, attempts read back, the job body reached, each fault "
                                   "struck) and for what it declares (the tenant setting its code sets, "
                                   "its lease, its finishes' dates). Exit 0 all held, 1 a check failed. "
                                   "The design's guarantees are search's to judge.")
    p.add_argument("design", metavar="DESIGN",
                   help="as search's --design: a built-in design, a hosted library (procrastinate, pg-boss, "
                        "...), package.module:attr or path/to/file.py:attr")
    p.add_argument("--time-scale", type=float, metavar="X",
                   help="multiply every duration (default 0.5, raised to a hosted library's floor)")
    p.set_defaults(command=run)
    return p


def plan(spec: str, design, options: dict[str, str], scale: float) -> list[tuple[str, Schedule]]:
    """The labelled schedules of a check (see the module docstring)."""
    points = design.points

    def make(jobs: tuple[JobSpec, ...], workers: int, events: tuple[Event, ...] = ()) -> Schedule:
        return Schedule(jobs=jobs, workers=workers, events=events, design=spec, design_options=options,
                        time_scale=scale, max_attempts=MAX_ATTEMPTS,
                        dequeues=dequeue_budget(len(jobs), MAX_ATTEMPTS))

    out = []
    for w in FAULT_FREE_WORKERS:
        jobs: tuple[JobSpec, ...] = (JobSpec(1, tenant=1), JobSpec(2, tenant=2), JobSpec(3, tenant=None))
        out.append((f"no fault; 3 jobs, {w} worker{'s' if w > 1 else ''}", make(jobs, w)))
    for name in JOB_FAULTS + SUPERVISOR_FAULTS:
        fault = CATALOGUE[name]
        point = fault.point if fault.point is not None and fault.point in points else points[0]
        events: tuple[Event, ...]
        if fault.kind == "job":
            jobs = (JobSpec(1, tenant=1, fault=name, point=point, strikes=1), JobSpec(2, tenant=None))
            events = ()
        else:
            jobs = (JobSpec(1, tenant=1), JobSpec(2, tenant=None))
            events = (Event(fault=name, job=1, point=point),)
        out.append((f"{name} at {point} on job 1; 2 jobs, 2 workers", make(jobs, 2, events)))
    return out


def _ids(ids) -> str:
    return ", ".join(str(i) for i in ids) or "none"


def _started(started, ids) -> str:
    return f"started: job {_ids(sorted(started & set(ids)))}" if started & set(ids) else "no job started"


def checks(schedule: Schedule, history) -> list[tuple[bool, str, str]]:
    """``(held, what, evidence)`` for every check of one run."""
    ids = [j.id for j in schedule.jobs]
    given = history.jobs if isinstance(history.jobs, list | tuple) else []
    problems = ([] if given is history.jobs
                else [f"final_states returned {type(history.jobs).__name__}, not a list"])
    odd = [r for r in given if not isinstance(r, dict)]
    if odd:
        problems.append(f"{len(odd)} row(s) not a dict: {odd[0]!r}")
    rows: dict = {}
    twice = []
    for r in given:
        if isinstance(r, dict):
            key = r.get("id") if isinstance(r.get("id"), int | str | None) else repr(r.get("id"))
            if key in rows:
                twice.append(key)
            rows[key] = r
    started = {r.get("job") for r in history.records if r.get("event") == LogEvent.STARTED}
    status = {i: rows[i].get("status") for i in ids if i in rows}
    fault_free = not schedule.faults()
    out = []

    missing = [i for i in ids if i not in rows]
    strange = [i for i in rows if i not in ids]
    unmapped = {i: s for i, s in status.items() if s not in STATES}
    if missing:
        problems.append(f"no row for job {_ids(missing)}")
    if twice:
        problems.append(f"job {_ids(twice)} twice")
    if strange:
        problems.append(f"a row for job {_ids(repr(i) for i in strange)}, not in the schedule")
    problems += [f"job {_ids(i for i, s in unmapped.items() if s == x)} status {x!r}, "
                 f"not one of {', '.join(STATES)}" for x in dict.fromkeys(unmapped.values())]
    out.append((not problems, "states: final_states maps every job to a state",
                "; ".join(problems) if problems else ", ".join(f"job {i}: {s}" for i, s in status.items())))

    # >= 1 only where the job ended done: a design that counts an attempt when it commits (one-transaction,
    # chancy) reads back 0 for a job still hanging at the end -- attempts-counted's to judge, not ours
    attempts = {i: rows[i].get("attempts") for i in ids if i in rows}
    bad = {i: f"{status[i]} with attempts {a!r}" for i, a in attempts.items()
           if isinstance(a, bool) or not isinstance(a, int)
           or a < (1 if fault_free or status[i] == "done" else 0)}
    bad.update({i: "(no row)" for i in ids if i not in rows})
    out.append((not bad, "attempts: read back, an int (>= 1 for a job done)",
                "; ".join(f"job {i} {a}" for i, a in sorted(bad.items())) if bad else
                ", ".join(f"job {i}: {a}" for i, a in attempts.items())))

    if fault_free:
        not_started = [i for i in ids if i not in started]
        not_done = [i for i in ids if status.get(i) != "done"]
        evidence = _started(started, ids)
        if not_started:
            evidence += f"; never started: job {_ids(not_started)}"
        if not_done:
            evidence += "; not done: " + ", ".join(f"job {i} {status.get(i, '(no row)')}" for i in not_done)
        out.append((not not_started and not not_done, "body: every job started and ended done", evidence))
        quiescent = history.ended_by == EndedBy.QUIESCENT
        notes = f" ({'; '.join(history.notes)})" if history.notes and not quiescent else ""
        out.append((quiescent,
                    "quiescent: the run ended when the design had nothing left",
                    f"ended {history.ended_by} after {history.t1 - history.t0:.2f} s{notes}"))
        out += [(f.held, f.what, f.evidence if f.held else f"{f.evidence}; fix: {f.fix}")
                for f in misdeclared.findings(history)]
        return out

    job = schedule.jobs[0].id
    out.append((job in started, f"body: job {job}, which carries the fault, started",
                _started(started, ids)))
    out.append(_struck(schedule, history, job))
    return out


def _struck(schedule: Schedule, history, job: int) -> tuple[bool, str, str]:
    name: str | None
    point: str | None
    if schedule.events:
        e = schedule.events[0]
        name = e.fault
        point = e.point
        hit = [x for x in history.injected
               if (x.get("fault"), x.get("job"), x.get("point")) == (name, job, point)]
        where = "the supervisor's injected list"
    else:
        name = schedule.jobs[0].fault
        point = schedule.jobs[0].point
        hit = [r for r in history.records if r.get("event") == LogEvent.FAULT
               and (r.get("fault"), r.get("job"), r.get("point")) == (name, job, point)]
        where = "the execution log"
    what = f"struck: {where} has {name} on job {job} at {point}"
    if hit:
        x = hit[0]
        return True, what, f"{x.get('worker')} job {job} attempt {x.get('attempt')}: {name} at {point}"
    fates = [f["fate"] for f in fault_fates(history) if f["fault"] == name and f["job"] == job]
    return False, what, f"no such record ({', '.join(fates) or 'not placed'}; reached: " \
                        f"{', '.join(sorted(history.points_reached())) or 'no point'})"


def _design_raised(exc: BaseException, design) -> bool:
    """Whether the design's own code (any class of its MRO) is in *exc*'s traceback."""
    files = set()
    for cls in type(design.design).__mro__[:-1]:
        try:
            source = inspect.getsourcefile(cls)
            if source is None:  # no source file to find it in
                continue
            files.add(Path(source).resolve())
        except (TypeError, OSError):
            continue
    return any(Path(f.filename).resolve() in files for f in traceback.extract_tb(exc.__traceback__))


def run(args, progress) -> int:
    if args.time_scale is not None and args.time_scale <= 0:
        raise UsageError("--time-scale must be greater than 0")
    options = parse_options(args.design_option)
    design = load_design(args.design, options)
    scale = _time_scale(args, [design])
    schedules = plan(args.design, design, options, scale)
    names = sorted({n for _, s in schedules for n in s.faults()})
    lines = []
    with runner_for(args.server, progress, names, designs=[design]) as runner:
        lines.append(f"{COMMAND} {args.design} ({design.name}): {len(schedules)} runs, time scale {scale:g}, "
                     f"{runner.database.server}")
        for n, (label, schedule) in enumerate(schedules, 1):
            step(progress, f"run {n}/{len(schedules)}: {label}", done=n - 1, total=len(schedules))
            try:
                results = checks(schedule, runner.run(schedule))
            except ChaosError:
                raise
            except Exception as exc:
                if not _design_raised(exc, design):
                    raise
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                results = [(False, "run: the design's code ran without raising",
                            f"{type(exc).__name__}: {exc} ({Path(frame.filename).name}:{frame.lineno} "
                            f"in {frame.name})")]
            lines += [f"{'ok' if held else 'FAILED':<6}  {label}: {what}: {evidence}"
                      for held, what, evidence in results]
        finish(progress)  # the bar closed before the results go to stdout
    failed = sum(line.startswith("FAILED") for line in lines)
    total = len(lines) - 1
    print("\n".join(lines))
    if failed:
        declared = {c for c in misdeclared.CHECKS for line in lines
                    if line.startswith("FAILED") and f": {c}: " in line}
        if failed > len(declared) * len(FAULT_FREE_WORKERS):
            print(f"{failed} of {total} checks FAILED: the harness cannot observe {design.name} as it must; "
                  "fix the adapter (workers/hosted/protocol.py states the protocol) before searching it")
        else:  # only what it declares: its verdicts would be false, not unseen
            print(f"{failed} of {total} checks FAILED: {design.name} declares what its code does not "
                  f"({', '.join(c for c in misdeclared.CHECKS if c in declared)}); fix it as each line says "
                  "before searching it, or its verdicts are false")
        return EXIT_VIOLATED
    print(f"all {total} checks held: the harness observes {design.name} "
          "(its guarantees are search's to judge)")
    return EXIT_HELD
