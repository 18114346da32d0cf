"""``python run.py bench --libraries --matrix``: one compare matrix of every hosted queue beside the
article's recommendations, each library at the lowest time scale it allows.

Designs are grouped by that scale (:func:`groups`): a library's ``min_time_scale``, never below
:data:`FLOOR`, the search's default, under which our own leases (and a supervisor handshake on a
loaded 2-core machine) stop having a margin. Every group is one ``compare`` of its libraries beside
:data:`BASELINES`, run as its own ``run.py compare`` process (its own server, its own Hypothesis
database), with its table, JSON and every deciding schedule saved in ``OUT/scale-X/``. The merged
matrix (:func:`merge`) then has one column per design -- the baselines once per scale, since a
lease design's verdicts move with the scale -- and a cell names the schedule file that decided it
and its class when the run said one (``caused_by``: at-least-once by design, a consequence of
another violation, the run's budget). Anything else is printed ``unclassified``: classifying it is
a person's work (docs/findings/libraries.md), not a guess of this module's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from ...core.errors import UsageError
from ...properties import PROPERTIES
from .. import scales

BASELINES = ("lease-heartbeat", "lease-outbox")
FLOOR = scales.SEARCH
FAULTS = "raise,crash,overrun,pause"  # one fault of each class the hosted tests cover


def groups(designs) -> dict[float, list[str]]:
    """``{time scale: [design names]}`` for the hosted *designs* (objects), ascending."""
    out: dict[float, list[str]] = {}
    for d in designs:
        scale = max(FLOOR, d.min_time_scale or 0.0)
        out.setdefault(scale, []).append(d.name)
    return dict(sorted(out.items()))


def run_group(scale: float, names: list[str], out_dir: Path, *, examples: int, seed: int, budget: float,
              faults: str = FAULTS, log=sys.stderr) -> tuple[dict, float]:
    """One ``compare`` of *names* beside the baselines at *scale*: its JSON and its seconds. A group
    this directory already holds complete (``group.json`` names the same designs and faults) is read,
    not run again: an interrupted matrix resumes where it stopped."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "matrix.json"
    done = out_dir / "group.json"
    wanted = {"designs": [*BASELINES, *names], "faults": faults, "examples": examples, "seed": seed}
    if done.exists() and target.exists():
        saved = json.loads(done.read_text())
        if {k: saved.get(k) for k in wanted} == wanted:
            return json.loads(target.read_text()), float(saved["seconds"])
    cmd = [sys.executable, "-m", "pg_job_chaos", "compare", "--designs", ",".join([*BASELINES, *names]),
           "--faults", faults, "--examples", str(examples), "--seed", str(seed), "--time-scale", f"{scale:g}",
           "--budget", f"{budget:g}", "--out", str(out_dir), "--json", str(target), "--no-config", "-q"]
    t0 = time.monotonic()
    with open(out_dir / "matrix.txt", "w") as text:
        code = subprocess.run(cmd, stdout=text, stderr=log, stdin=subprocess.DEVNULL).returncode
    seconds = time.monotonic() - t0
    if code not in (0, 1) or not target.exists():  # 1: a property violated, which a matrix expects
        raise RuntimeError(f"compare at time scale {scale:g} exited {code}: {' '.join(cmd)}")
    done.write_text(json.dumps({**wanted, "seconds": round(seconds, 1)}) + "\n")
    return json.loads(target.read_text()), seconds


def _relative(file: str, root: Path) -> str:
    """*file* (as the compare wrote it: absolute, or relative to this process's directory) as a link
    from ``root/matrix.md``."""
    try:
        return Path(file).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(file).as_posix()


def _cell(prop: dict, decided: int | None, files: list[str]) -> str:
    status = prop.get("status", "-")
    if status != "violated":
        return status
    cell = f"VIOLATED ({prop.get('count', 0)})"
    if decided is not None:
        cell += f" [S{decided}]({Path(files[decided - 1]).as_posix()})"
    return cell + f" {prop['caused_by'] if prop.get('caused_by') else 'unclassified'}"


def merge(results: dict[float, dict], *, root: Path) -> str:
    """The merged matrix as Markdown: a column per design (baselines per scale); links relative to *root*."""
    columns = []  # (header, properties, decided_by, files)
    for scale, data in results.items():
        files = [_relative(f, root) for f in data.get("files", [])]
        for name, d in data["designs"].items():
            header = f"{name} @{scale:g}"
            columns.append((header, d["properties"], d.get("decided_by", {}), files))
    lines = ["| property | " + " | ".join(c[0] for c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for prop in PROPERTIES:
        cells = [_cell(p.get(prop, {}), dec.get(prop), files) for _, p, dec, files in columns]
        lines.append(f"| {prop} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def figures(libs, out, *, root: Path, examples: int, seed: int = 1, budget: float = 600.0) -> None:
    """Run every group, save each, print and write the merged matrix (``root/matrix.md``)."""
    if not libs:
        raise UsageError("no hosted library imports here: nothing to compare (pip install -e '.[libraries]')")
    plan = groups(libs)
    results = {}
    times = {}
    for scale, names in plan.items():
        print(f"  compare at time scale {scale:g}: {', '.join([*BASELINES, *names])} ...", file=out,
              flush=True)
        results[scale], times[scale] = run_group(scale, names, root / f"scale-{scale:g}", examples=examples,
                                                 seed=seed, budget=budget)
        print(f"    {times[scale]:.0f} s", file=out, flush=True)
    table = merge(results, root=root)
    total = sum(times.values())
    head = (f"One matrix, {len(libs)} hosted libraries beside {', '.join(BASELINES)}; faults {FAULTS}; "
            f"{examples} examples a design, seed {seed}, at most {budget:g} s of new schedules a design; "
            f"{total:.0f} s in all ("
            + ", ".join(f"scale {s:g}: {t:.0f} s" for s, t in times.items()) + ").\n\n")
    (root / "matrix.md").write_text(head + table)
    print(head + table, file=out)
