"""Runs and searches from inside a test: the same search the command line runs, minus the printing.

A :class:`ChaosSession` wraps one :class:`~harness.runner.Runner` (one database) and the plugin's
settings; :meth:`ChaosSession.with_defaults` gives a copy with a test's marker defaults. Nothing
here prints: a test asserts on the :class:`~pg_job_chaos.results.ChaosResult` it gets back.

A run whose faults need more of the server than that database's gives (``faults/catalogue.py``: a
``restart`` needs durable settings and the local server) runs where they get it, as on the command
line: with *servers* (:class:`~harness.session.Servers`, the pytest plugin's) on a server of its own,
started once; without, it is refused (:func:`~harness.session.check_server`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from .core.errors import UsageError
from .core.schedule import Schedule
from .faults.catalogue import parse_faults
from .harness import scales
from .harness.engine import schedules as schedule_files
from .harness.report.result import replay_command
from .harness.session import check_server
from .properties import check
from .results import ChaosResult
from .workers.design import DesignHandle


@dataclass(frozen=True)
class Settings:
    """The plugin's options (command line over ini over these defaults) and a test's marker."""

    examples: int = 10
    time_scale: float = scales.SEARCH
    seed: int | None = None
    out: Path = Path("chaos-out")
    root: Path = Path(".")  # relative design files are found from here
    html: Path | None = None  # a directory: one page per search that violated something
    strict: bool = False  # assert_held fails on unknown too, and on a fault that never struck
    budget: float | None = None  # seconds after which a search starts no new schedule (--chaos-budget)
    gate: tuple[str, ...] | None = None  # properties whose violation fails (--chaos-fail-on/--chaos-allow)
    defaults: dict = field(default_factory=dict)  # design, faults, tenant_mode, workers, ... (marker)


class ChaosSession:
    def __init__(self, runner, settings: Settings, *, servers=None):
        self.runner = runner
        self.settings = settings
        self.servers = servers  # harness.session.Servers: where a run goes whose faults need another server

    def with_defaults(self, **defaults) -> ChaosSession:
        """A session whose :meth:`search` and :meth:`run` use *defaults* for arguments not given."""
        known = {"design", "faults", "tenant_mode", "examples", "time_scale", "seed", "workers",
                 "design_options", "budget"}
        bad = sorted(set(defaults) - known)
        if bad:
            raise UsageError(f"chaos_config: unknown option {bad[0]!r}; options: {', '.join(sorted(known))}")
        merged = {**self.settings.defaults, **defaults}
        return ChaosSession(self.runner, dataclasses.replace(self.settings, defaults=merged),
                            servers=self.servers)

    def _on(self, fault_names) -> ChaosSession:
        """This session, or one like it on the server *fault_names* need (:attr:`servers`); without
        servers a :class:`UsageError` when this one's server lacks what they need."""
        if self.servers is None:
            check_server(self.runner.database, fault_names)
            return self
        runner = self.servers.runner(fault_names)
        return self if runner is self.runner else ChaosSession(runner, self.settings, servers=self.servers)

    def _opt(self, given, name: str, fallback):
        if given is not None:
            return given
        return self.settings.defaults.get(name, fallback)

    def _design(self, spec: str, options: dict | None = None) -> DesignHandle:
        """The design's handle, built once for this session (its runner keeps it); a usage error now,
        before anything runs. A relative ``path/file.py:attr`` is taken from the project's root."""
        module, sep, attr = spec.rpartition(":")
        if sep and module.endswith(".py") and not Path(module).is_absolute():
            candidate = self.settings.root / module
            if candidate.is_file():
                spec = f"{candidate}:{attr}"
        return self.runner.handle(spec, options)

    def search(self, *, design: str | None = None, faults: str | None = None, tenant_mode: str | None = None,
               examples: int | None = None, time_scale: float | None = None, seed: int | None = None,
               workers: int | None = None, design_options: dict[str, str] | None = None,
               budget: float | None = None) -> ChaosResult:
        """Search for a schedule that violates a property of *design* under *faults*, shrink it, save
        it (stamped) under the ``--chaos-out`` directory: the command line's search and its rules (no
        fault could strike fails; a fault that never struck is said, and fails with ``strict``).
        *design_options* are the ``--design-option`` pairs; *budget* the seconds after which no new
        schedule starts. Raises :class:`~core.errors.UsageError` for an unknown design or fault, or
        faults no server of this session can serve (a restart on a DSN's)."""
        from .harness.engine.search import search
        from .harness.report import build

        fault_names = self._opt(faults, "faults", "")
        fault_list = parse_faults(fault_names if isinstance(fault_names, str) else ",".join(fault_names))
        on = self._on(fault_list)
        if on is not self:
            return on.search(design=design, faults=faults, tenant_mode=tenant_mode, examples=examples,
                             time_scale=time_scale, seed=seed, workers=workers, design_options=design_options,
                             budget=budget)
        options = dict(self._opt(design_options, "design_options", {}) or {})
        handle = self._design(self._opt(design, "design", "lease"), options)
        mode = self._opt(tenant_mode, "tenant_mode", "local")
        n = self._opt(examples, "examples", self.settings.examples)
        seed = self._opt(seed, "seed", self.settings.seed)
        out = search(self.runner.run, faults=fault_list, design=handle, tenant_mode=mode, examples=n,
                     seed=seed, time_scale=self._opt(time_scale, "time_scale", self.settings.time_scale),
                     workers=self._opt(workers, "workers", None),
                     budget=self._opt(budget, "budget", self.settings.budget), gate=self.settings.gate)
        report = build.search_report(out, faults=fault_list, design=handle.spec, tenant_mode=mode,
                                     examples=n, seed=seed, server=self.runner.database.environment(),
                                     stamp=self.runner.stamp, out_dir=self.settings.out,
                                     strict=self.settings.strict, gate=self.settings.gate)
        return self._result(report)

    def _result(self, report) -> ChaosResult:
        page = None
        if self.settings.html is not None and report.saved and report.failed:
            from .harness.report import files, html

            page = html.write(self.settings.html / f"{report.saved[0].file.stem}.html", **files.page(report))
        return ChaosResult.from_report(report, strict=self.settings.strict, page=page)

    def run(self, schedule: Schedule, *, design: str | None = None, save: bool = True) -> ChaosResult:
        """Run one schedule and check every property; a violating schedule is saved (with *save*)."""
        from .harness.report import build

        on = self._on(schedule.faults())
        if on is not self:
            return on.run(schedule, design=design, save=save)
        schedule = schedule.replace(
            design=self._design(design or schedule.design, schedule.design_options).spec)
        history = self.runner.run(schedule)
        results = check(history)
        title = f"{schedule.design} ({schedule.tenant_mode}), one schedule"
        result = ChaosResult(title, results, schedule=schedule, history=history, strict=self.settings.strict,
                             gate=self.settings.gate)
        if save and result.violated:
            stamped = self.runner.stamp(schedule)
            result.schedule = stamped
            result.file = build.save(stamped, self.settings.out, build.schedule_stem(schedule.design, "run"))
            result.replay = replay_command(result.file)
        return result

    def replay(self, file: str | Path, *, design: str | None = None) -> ChaosResult:
        """Run a saved schedule file again (what the replay command does)."""
        from .harness.report import build

        schedule = schedule_files.load(file)
        on = self._on(schedule.faults())
        if on is not self:
            return on.replay(file, design=design)
        schedule = schedule.replace(
            design=self._design(design or schedule.design, schedule.design_options).spec)
        history = self.runner.run(schedule)
        report = build.replay_report(history, check(history), schedule, file, strict=self.settings.strict,
                                     gate=self.settings.gate)
        return self._result(report)
