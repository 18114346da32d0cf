"""The systems a corpus case may name: how each one's versions are installed beside the pinned one.

A Python library (``pip``) gets a virtual environment per version in which the harness itself runs
(its adapter imports the library in the harness's process); a Node library (``npm``) gets an npm prefix
per version, whose ``node_modules`` the contract client finds first (``PGJC_NODE_MODULES``,
``workers/hosted/contract.py``). :data:`SYSTEMS` maps a case's ``system`` to its :class:`System`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["SYSTEMS", "System", "refusal"]


@dataclass(frozen=True)
class System:
    """One system: the ``design`` that hosts it, the ``distribution`` whose version is installed (as the
    adapter's ``library`` names it), how (``pip`` or ``npm``), and the requirement for a version
    (``{version}`` filled in)."""

    name: str
    design: str
    distribution: str
    installer: str  # "pip" or "npm"
    requirement: str

    def requirement_for(self, version: str) -> str:
        return self.requirement.format(version=version)


SYSTEMS: dict[str, System] = {s.name: s for s in (
    System("pgqueuer", "pgqueuer", "pgqueuer", "pip", "pgqueuer[psycopg]=={version}"),
    System("procrastinate", "procrastinate", "procrastinate", "pip", "procrastinate=={version}"),
    System("chancy", "chancy", "chancy", "pip", "chancy=={version}"),
    System("awa", "awa", "awa-pg", "pip", "awa-pg=={version}"),
    System("dbos", "dbos", "dbos", "pip", "dbos=={version}"),
    # its [compat] extra: on Python 3.11 Django 6 (django.tasks) is out; adapters/django_tasks.py
    System("django-tasks-db", "django-tasks-db", "django-tasks-db", "pip",
           "django-tasks-db[compat]=={version}"),
    System("pg-boss", "pg-boss", "pg-boss", "npm", "pg-boss@{version}"),
    System("graphile-worker", "graphile-worker", "graphile-worker", "npm", "graphile-worker@{version}"),
)}


def _major(version: str) -> int | None:
    m = re.match(r"\s*v?(\d+)", version)
    return int(m.group(1)) if m else None


def node_major() -> int | None:
    """The major version of the ``node`` on PATH (None: no node)."""
    node = shutil.which("node")
    if node is None:
        return None
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False, timeout=30)
    return _major(out.stdout)


# What a version needs that this machine may lack: (system, the first major that needs it, the Node major
# it needs). pg-boss 11.0.0's package.json: "engines": {"node": ">=22"}.
NODE_FLOORS = (("pg-boss", 11, 22),)


def refusal(system: System, version: str) -> str | None:
    """Why *version* of *system* cannot be installed or run here (None: it can, as far as is known before
    trying; the installer's own failure is the other refusal, :mod:`.envs`)."""
    if system.installer == "npm":
        have = node_major()
        if have is None:
            return "no node on PATH"
        major = _major(version)
        for name, first, needs in NODE_FLOORS:
            if name == system.name and major is not None and major >= first and have < needs:
                return (f"{system.name} {version} needs Node >= {needs} (its package.json engines); "
                        f"this node is {have}")
    return None
