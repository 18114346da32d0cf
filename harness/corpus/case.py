"""A corpus case: one bug a queue's users reported, as a small TOML file a user can write.

A case names the system, the version with the bug and the version that fixed it (or none: still open),
the upstream link and a one-line summary, what the search may use -- the *kind* of fault the report
describes (faults, workload, replica, pooler, design options, tenant mode, time scale, workers, a deploy's
grace) -- the
property that must be violated, and the buggy side's time budget. Never jobs, points, seeds or a
schedule: the search finds those. Example (``docs/reference/corpus.md``)::

    system = "procrastinate"
    buggy = "3.10.0"
    fixed = "none"
    link = "https://github.com/procrastinate-org/procrastinate/..."
    summary = "a stale execution's success is accepted while its re-run is doing"
    property = "library-one-finish"
    budget = 300

    [search]
    faults = ["pause"]
    time_scale = 0.2

:func:`load` validates a file as :mod:`harness.engine.schedules` validates a schedule: a wrong field is a
:class:`~core.errors.UsageError` naming the file and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import UsageError
from ...core.workload import WORKLOADS
from ...faults.catalogue import parse_faults
from ...properties import PROPERTIES
from .systems import SYSTEMS

__all__ = ["Case", "OPEN", "load", "load_dir"]

OPEN = "none"  # fixed = "none": no release has fixed it (only the buggy side runs)

REQUIRED = ("system", "buggy", "link", "summary", "property", "budget")
OPTIONAL = ("fixed", "verified", "quick", "blocked", "search")
SEARCH = ("faults", "workload", "replica", "pooler", "design_options", "tenant_mode", "time_scale", "workers",
          "grace")
# what a case never holds: the search finds them (a case names the kind of fault, not where it strikes)
NEVER = ("jobs", "job", "points", "point", "seed", "seeds", "schedule", "events", "occurrences")
MAX_BUDGET = 3600.0  # seconds: a case's budget above an hour is a typo, not a hunt


@dataclass(frozen=True)
class Case:
    """One validated case. ``fixed`` is None for an open bug; ``blocked`` says why it cannot run here
    (then it is listed, never run); ``search`` holds only :data:`SEARCH` keys."""

    name: str  # the file's stem
    file: Path
    system: str
    buggy: str
    fixed: str | None
    link: str
    summary: str
    prop: str  # the TOML's ``property``: the one that must be violated
    budget: float
    search: dict = field(default_factory=dict)
    verified: str = ""  # where the bug is in the source at both versions (file:line), and the thread's end
    quick: bool = False  # one of run.py corpus --quick's cases
    blocked: str | None = None

    @property
    def design(self) -> str:
        return SYSTEMS[self.system].design

    def search_flags(self) -> list[str]:
        """The case's ``search`` table as ``run.py search`` flags."""
        s = self.search
        out: list[str] = []
        if s.get("faults"):
            out += ["--faults", ",".join(s["faults"])]
        for key in ("workload", "replica", "pooler", "tenant_mode"):
            if s.get(key) is not None:
                out += [f"--{key.replace('_', '-')}", str(s[key])]
        if s.get("time_scale") is not None:
            out += ["--time-scale", repr(float(s["time_scale"]))]
        if s.get("workers") is not None:
            out += ["--workers", str(s["workers"])]
        if s.get("grace") is not None:
            out += ["--grace", repr(float(s["grace"]))]
        for k, v in s.get("design_options", {}).items():
            out += ["--design-option", f"{k}={v}"]
        return out


def _bad(path: Path, what: str) -> UsageError:
    return UsageError(f"case {path}: {what}")


def _text(path: Path, data: dict, key: str) -> str:
    v = data[key]
    if not isinstance(v, str) or not v.strip():
        raise _bad(path, f"{key}: a non-empty string, not {v!r}")
    return v.strip()


def _search(path: Path, raw: object) -> dict:
    if not isinstance(raw, dict):
        raise _bad(path, f"search: a table, not {raw!r}")
    for key in raw:
        if key in NEVER:
            raise _bad(path, f"search.{key}: a case names the kind of fault, never {', '.join(NEVER)} "
                             "(the search finds them)")
        if key not in SEARCH:
            raise _bad(path, f"search.{key}: unknown field; search fields: {', '.join(SEARCH)}")
    out = dict(raw)
    faults = out.get("faults", [])
    if isinstance(faults, str):
        faults = [f.strip() for f in faults.split(",") if f.strip()]
    if not isinstance(faults, list) or not all(isinstance(f, str) for f in faults):
        raise _bad(path, f"search.faults: a list of fault names, not {raw.get('faults')!r}")
    try:
        parse_faults(",".join(faults))
    except UsageError as exc:
        raise _bad(path, f"search.faults: {exc}") from None
    out["faults"] = faults
    if "workload" in out and str(out["workload"]).partition(":")[0] not in WORKLOADS:
        raise _bad(path, f"search.workload: {out['workload']!r}; workloads: {', '.join(WORKLOADS)}")
    if "replica" in out and out["replica"] not in ("async", "sync"):
        raise _bad(path, f"search.replica: {out['replica']!r}; async or sync")
    if "pooler" in out and not str(out["pooler"]).startswith("pgbouncer"):
        raise _bad(path, f"search.pooler: {out['pooler']!r}; pgbouncer[:transaction|session[:N]]")
    if "time_scale" in out and not (isinstance(out["time_scale"], int | float) and out["time_scale"] > 0):
        raise _bad(path, f"search.time_scale: a number greater than 0, not {out['time_scale']!r}")
    if "workers" in out and not (isinstance(out["workers"], int) and 1 <= out["workers"] <= 50):
        raise _bad(path, f"search.workers: a whole number from 1 to 50, not {out['workers']!r}")
    grace = out.get("grace")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0):
        raise _bad(path, f"search.grace: a deploy's grace in article seconds, 0 or more, not {grace!r}")
    if grace is not None and "deploy" not in faults:
        raise _bad(path, "search.grace: a deploy's grace, for a case whose faults include deploy")
    options = out.get("design_options", {})
    scalar = str | int | float | bool
    if not isinstance(options, dict) or not all(isinstance(v, scalar) for v in options.values()):
        raise _bad(path, f"search.design_options: a table of KEY = value, not {options!r}")
    out["design_options"] = {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                             for k, v in options.items()}
    return out


def parse(path: Path, data: dict) -> Case:
    """A :class:`Case` from *data* (a TOML table read from *path*); a :class:`UsageError` names the field."""
    for key in data:
        if key in NEVER:
            raise _bad(path, f"{key}: a case names the kind of fault, never {', '.join(NEVER)} "
                             "(the search finds them)")
        if key not in REQUIRED + OPTIONAL:
            raise _bad(path, f"{key}: unknown field; fields: {', '.join(REQUIRED + OPTIONAL)}")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise _bad(path, f"missing {', '.join(missing)} (fields: {', '.join(REQUIRED)} are required)")
    system = _text(path, data, "system")
    if system not in SYSTEMS:
        raise _bad(path, f"system: {system!r}; systems: {', '.join(SYSTEMS)}")
    prop = _text(path, data, "property")
    if prop not in PROPERTIES:
        raise _bad(path, f"property: {prop!r}; properties: {', '.join(PROPERTIES)}")
    budget = data["budget"]
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not 0 < budget <= MAX_BUDGET:
        raise _bad(path, f"budget: seconds, greater than 0 and at most {MAX_BUDGET:g}, not {budget!r}")
    fixed = _text(path, data, "fixed") if "fixed" in data else OPEN
    link = _text(path, data, "link")
    if not link.startswith(("https://", "http://", "docs/")):
        raise _bad(path, f"link: the upstream thread's URL (or, for a bug of our finding with no thread, its "
                         f"page under docs/), not {link!r}")
    quick = data.get("quick", False)
    if not isinstance(quick, bool):
        raise _bad(path, f"quick: true or false, not {quick!r}")
    return Case(name=path.stem, file=path, system=system, buggy=_text(path, data, "buggy"),
                fixed=None if fixed == OPEN else fixed, link=link, summary=_text(path, data, "summary"),
                prop=prop, budget=float(budget), search=_search(path, data.get("search", {})),
                verified=_text(path, data, "verified") if "verified" in data else "", quick=quick,
                blocked=_text(path, data, "blocked") if "blocked" in data else None)


def load(path: str | Path) -> Case:
    """The case in the TOML file *path*; a :class:`UsageError` for a file that is not one."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"case {path}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise _bad(path, f"not TOML: {exc}") from None
    return parse(path, data)


def load_dir(folder: str | Path) -> list[Case]:
    """Every ``*.toml`` case in *folder*, by name; a :class:`UsageError` for a folder with none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"--cases {folder}: not a folder")
    cases = [load(p) for p in sorted(folder.glob("*.toml"))]
    if not cases:
        raise UsageError(f"--cases {folder}: no *.toml case in it")
    return cases
