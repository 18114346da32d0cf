"""Runs and searches from inside a test: the same search the command line runs, minus the printing.

A :class:`ChaosSession` wraps one :class:`~harness.runner.Runner` (one database) and the plugin's
settings; :meth:`ChaosSession.with_defaults` gives a copy with a test's marker defaults. Nothing
here prints: a test asserts on the :class:`~pg_job_chaos.results.ChaosResult` it gets back.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .core.errors import UsageError
from .core.schedule import Schedule
from .faults.catalogue import parse_faults
from .harness import scales
from .harness.engine import schedules as schedule_files
from .properties import check
from .results import ChaosResult
from .workers import load_design

REPLAY = "pg-job-chaos replay {file}"  # the console script pip installs; run.py's --replay is the same


@dataclass(frozen=True)
class Settings:
    """The plugin's options (command line over ini over these defaults) and a test's marker."""

    examples: int = 10
    time_scale: float = scales.SEARCH
    seed: int | None = None
    out: Path = Path("chaos-out")
    root: Path = Path(".")  # relative design files are found from here
    html: Path | None = None  # a directory: one page per search that violated something
    strict: bool = False  # assert_held fails on unknown too
    defaults: dict = field(default_factory=dict)  # design, faults, tenant_mode, workers, ... (marker)


class ChaosSession:
    def __init__(self, runner, settings: Settings):
        self.runner = runner
        self.settings = settings

    def with_defaults(self, **defaults) -> ChaosSession:
        """A session whose :meth:`search` and :meth:`run` use *defaults* for arguments not given."""
        known = {"design", "faults", "tenant_mode", "examples", "time_scale", "seed", "workers"}
        bad = sorted(set(defaults) - known)
        if bad:
            raise UsageError(f"chaos_config: unknown option {bad[0]!r}; options: {', '.join(sorted(known))}")
        merged = {**self.settings.defaults, **defaults}
        return ChaosSession(self.runner, dataclasses.replace(self.settings, defaults=merged))

    def _opt(self, given, name: str, fallback):
        if given is not None:
            return given
        return self.settings.defaults.get(name, fallback)

    def _design(self, spec: str) -> str:
        """A relative ``path/file.py:attr`` is taken from the project's root directory."""
        module, sep, attr = spec.rpartition(":")
        if sep and module.endswith(".py") and not Path(module).is_absolute():
            candidate = self.settings.root / module
            if candidate.is_file():
                spec = f"{candidate}:{attr}"
        load_design(spec)  # a usage error now, before anything runs
        return spec

    def search(self, *, design: str | None = None, faults: str | None = None, tenant_mode: str | None = None,
               examples: int | None = None, time_scale: float | None = None, seed: int | None = None,
               workers: int | None = None) -> ChaosResult:
        """Search for a schedule that violates a property of *design* under *faults*, shrink it, save
        it under the ``--chaos-out`` directory; the result says what held. Raises
        :class:`~core.errors.UsageError` for an unknown design or fault."""
        from .harness.engine.search import search

        design = self._design(self._opt(design, "design", "lease"))
        fault_names = self._opt(faults, "faults", "")
        fault_list = parse_faults(fault_names if isinstance(fault_names, str) else ",".join(fault_names))
        mode = self._opt(tenant_mode, "tenant_mode", "local")
        scale = self._opt(time_scale, "time_scale", self.settings.time_scale)
        n = self._opt(examples, "examples", self.settings.examples)
        out = search(self.runner.run, faults=fault_list, design=design, tenant_mode=mode, examples=n,
                     seed=self._opt(seed, "seed", self.settings.seed), time_scale=scale,
                     workers=self._opt(workers, "workers", None))
        names = ",".join(f.name for f in fault_list) or "none"
        title = f"{design} ({mode}) under faults {names}: {len(out.runs)} runs"
        result = ChaosResult(title, out.aggregate(), runs=len(out.runs), flaky=out.flaky,
                             strict=self.settings.strict)
        if out.counterexample is not None:
            ce = out.counterexample
            result.schedule, result.history = ce.schedule, ce.history
            result.file = self._save(ce.schedule, f"{Path(design).name}-{names}")
            result.replay = REPLAY.format(file=result.file)
            if self.settings.html is not None:
                result.page = self._page(result, ce.violated)
        return result

    def _page(self, result: ChaosResult, violated: list[str]) -> Path:
        from .harness.report import html

        return html.write(self.settings.html / f"{result.file.stem}.html", title=result.title,
                          tables=[("properties", result.properties)],
                          counterexamples=[html.counterexample(
                              name="counterexample", schedule_json=result.schedule.to_json(),
                              file=str(result.file), replay=result.replay, violated=violated,
                              history=result.history)])

    def run(self, schedule: Schedule, *, design: str | None = None, save: bool = True) -> ChaosResult:
        """Run one schedule and check every property; a violating schedule is saved (with *save*)."""
        schedule = schedule.replace(design=self._design(design or schedule.design))
        history = self.runner.run(schedule)
        results = check(history)
        result = ChaosResult(f"{schedule.design} ({schedule.tenant_mode}), one schedule", results,
                             schedule=schedule, history=history, strict=self.settings.strict)
        if save and result.violated:
            result.file = self._save(schedule, f"{Path(schedule.design).name}-run")
            result.replay = REPLAY.format(file=result.file)
        return result

    def replay(self, file: str | Path, *, design: str | None = None) -> ChaosResult:
        """Run a saved schedule file again (what the replay command does)."""
        result = self.run(schedule_files.load(file), design=design, save=False)
        result.file, result.replay = Path(file), REPLAY.format(file=file)
        return result

    def _save(self, schedule: Schedule, stem: str) -> Path:
        out = self.settings.out
        out.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.,-]+", "_", stem).replace(",", "-")
        path = out / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{time.monotonic_ns() % 10**6:06d}.json"
        path.write_text(schedule.to_json() + "\n")
        return path
