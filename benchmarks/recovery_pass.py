"""The small-scope pass's recovery cases alone (issue 47: ``restart`` and ``deploy`` aimed at a design's
declared recovery statements), for the "restart aimed at recovery" rows of docs/findings/libraries.md.

``run.py search`` runs the pass's job-point cases first: on a queue whose crash cases each wait for its
recovery (River's rescuer, ~160 s a case) a ``--budget`` ends the pass before the recovery cases come.
This runs the search with the pass cut to its fault-free cases (which show the design's statements) and its
recovery cases; the statement, cut and last-attempt cases are skipped, Hypothesis's examples run as usual,
and shrinking is capped (``--shrink N``, default 4). Each recovery run's schedule is saved to
``DIR/recN.json`` and its faults' fates, violations and timeline appended to ``DIR/recovery-runs.txt``.

    python benchmarks/recovery_pass.py DIR search --design river --faults crash,restart --seed 1 \\
        --examples 10 --parallel 1 --time-scale 0.5 --budget 300

It replaces functions of ``harness/engine`` for this process only (a benchmark, not a product option).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pg_job_chaos.core.coverage import fault_fates
from pg_job_chaos.harness.cli.main import main
from pg_job_chaos.harness.engine import search, smallscope
from pg_job_chaos.harness.report.text import timeline

RECOVERY = "; recovery"  # how smallscope.recovery_schedules labels its cases


def _only_recovery(out: Path, shrink: int) -> None:
    search.HYPOTHESIS_SHRINK = search.SHRINK_RUNS = shrink
    schedules = smallscope.schedules
    smallscope.schedules = lambda **kw: [(label, s) for label, s in schedules(**kw)
                                         if label.startswith("no fault")]
    smallscope.statement_schedules = lambda *a, **kw: []
    smallscope.cut_schedules = lambda *a, **kw: []
    smallscope.last_attempt_schedules = lambda *a, **kw: []
    recovery = smallscope.recovery_schedules

    def recovery_logged(*a, **kw):
        cases = recovery(*a, **kw)
        with open(out / "recovery-runs.txt", "a") as f:
            f.write(f"recovery schedules: {len(cases)}\n" + "".join(f"  {label}\n" for label, _ in cases))
        return cases

    smallscope.recovery_schedules = recovery_logged
    record = search.Search._record
    seen = [0]

    def record_logged(self, schedule, history, seconds, label):
        r = record(self, schedule, history, seconds, label)
        if label and label.endswith(RECOVERY):
            seen[0] += 1
            (out / f"rec{seen[0]}.json").write_text(schedule.to_json())
            with open(out / "recovery-runs.txt", "a") as f:
                f.write(f"\n=== rec{seen[0]}: {label} ({seconds:.1f} s)\nviolated: {r.violated}\n"
                        f"fates: {json.dumps(fault_fates(history))}\n{timeline(history)}\n")
        return r

    search.Search._record = record_logged  # type: ignore[method-assign]


if __name__ == "__main__":  # a library's spawned children (chancy's process executor) import this again
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit("usage: python benchmarks/recovery_pass.py DIR [--shrink N] search ARGS...")
    directory = Path(args.pop(0))
    directory.mkdir(parents=True, exist_ok=True)
    runs = 4
    if args[:1] == ["--shrink"]:
        runs = int(args[1])
        del args[:2]
    _only_recovery(directory, runs)
    sys.argv = ["run.py", *args]
    sys.exit(main())
