"""One case hunted: the default seeded search at the buggy version until the case's property is violated
or its budget ends, then the same search (same seed) at the fixed version, which must hold it.

Each side runs the harness as a subprocess in that version's environment (:mod:`.envs`):
``<python> -m pg_job_chaos search --design D --fail-on PROP --stop-at-first --seed S --budget B
--replays R --json F`` plus the case's search flags, so what runs is exactly the ``search`` a user runs.
The buggy side's counterexample is replayed R times by that search (``--replays``); the count is its
reproducibility.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...core.errors import EXIT_HELD, EXIT_VIOLATED
from .case import Case
from .envs import Env

__all__ = ["EXAMPLES_ABOVE_BUDGET", "Side", "hunt_side"]

# The example budget each side is given: one a second of its time budget, and this many more, so that the
# time budget (--budget, the case's) is what ends a search that finds nothing (no run takes under a second:
# the database's reset alone). Hazard: not more -- once the time budget is spent Hypothesis still *draws*
# every example of max_examples (each returns unrun), which with 100,000 took minutes of CPU.
EXAMPLES_ABOVE_BUDGET = 50
STOP_GRACE = 60.0  # seconds a search is given to clean up after SIGTERM before it is killed


@dataclass
class Side:
    """One side of a case: the search at one version and what it showed. ``verdict``: ``violated``
    (found), ``held`` (searched its whole budget, never violated), ``error`` (the search itself failed:
    ``error`` says how), ``not run``."""

    version: str
    env: str = ""
    verdict: str = "not run"
    runs: int = 0
    seconds: float = 0.0
    first_seconds: float | None = None  # to the first run that violated the property
    first_runs: int | None = None  # runs made until then, that one included
    schedule: dict | None = None  # the shrunk counterexample
    file: str | None = None
    replay: str | None = None  # the command that replays it in this version's environment
    replays: int = 0
    reproduced: int = 0
    budget_spent: bool = False
    error: str | None = None
    log: str | None = None  # the search's own output
    command: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def command(case: Case, env: Env, *, seed: int, budget: float, replays: int, json_path: Path,
            out_dir: Path, server: list[str]) -> list[str]:
    """The ``search`` command line one side runs."""
    return [env.python, "-m", "pg_job_chaos", "search", "--design", case.design,
            "--fail-on", case.prop, "--stop-at-first", "--seed", str(seed),
            "--examples", str(int(budget) + EXAMPLES_ABOVE_BUDGET), "--budget", f"{budget:g}",
            "--replays", str(replays),
            "--json", str(json_path), "--out", str(out_dir), "--no-config",
            *case.search_flags(), *server]


def hunt_side(case: Case, env: Env, version: str, *, seed: int, budget: float, replays: int,
              out_dir: Path, server: list[str], label: str) -> Side:
    """Run one side's search in *env* and read its JSON into a :class:`Side`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{case.name}-{label}.json"
    log_path = out_dir / f"{case.name}-{label}.log"
    json_path.unlink(missing_ok=True)
    cmd = command(case, env, seed=seed, budget=budget, replays=replays, json_path=json_path,
                  out_dir=out_dir / f"{case.name}-{label}", server=server)
    side = Side(version=version, env=env.label, command=cmd, log=str(log_path))
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env.environment())
        try:
            code = p.wait()
        except BaseException:  # interrupted: the search stops its workers and server on SIGTERM
            p.terminate()
            try:
                p.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            raise
    side.seconds = time.monotonic() - t0
    if code not in (EXIT_HELD, EXIT_VIOLATED) or not json_path.exists():
        tail = [line for line in log_path.read_text().splitlines() if line.strip()][-3:]
        side.verdict = "error"
        side.error = f"exit {code}: {' / '.join(tail)}"
        return side
    data = json.loads(json_path.read_text())
    side.runs = data.get("runs", 0)
    side.seconds = data.get("seconds", side.seconds)
    side.budget_spent = bool(data.get("budget_spent"))
    prop = data["properties"].get(case.prop, {})
    side.verdict = "violated" if prop.get("status") == "violated" else (
        "held" if prop.get("status") == "held" else str(prop.get("status", "unknown")))
    first = data.get("first_failure")
    if first is not None:
        side.first_seconds = first["seconds"]
        side.first_runs = first["runs"]
    ce = data.get("counterexample")
    if ce is not None:
        side.schedule = ce["schedule"]
        side.file = ce["file"]
        side.replays = ce.get("replays", 0)
        side.reproduced = ce.get("reproduced", 0)
        side.replay = shlex.join([env.python, "-m", "pg_job_chaos", "replay", ce["file"]]) if not env.pinned \
            else ce["replay"]
    return side
