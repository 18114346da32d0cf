"""pg-job-chaos: a chaos / fault-injection harness for PostgreSQL-backed background job workers.

Installed, the project is this one package. Its layers are sub-packages, kept in the repository as
top-level folders and mapped here by ``pyproject.toml`` (``pg_job_chaos.workers`` is ``workers/``):
``core`` (schedule, history, errors), ``faults`` (the catalogue), ``workers`` (the designs, the hosted
protocol), ``properties`` (the invariants), ``adapters`` (real queue libraries), ``harness``
(provisioning, supervisor, search engine, reporting, command line).

The public API is what ``__all__`` names; everything else is internal and may change. Write a
design for your own worker (:class:`HostedDesign`, :func:`run_job`), run and search it from pytest
(the plugin's ``chaos_session`` fixture, a :class:`ChaosSession`), or draw schedules yourself::

    from hypothesis import given, settings
    from pg_job_chaos import schedules

    @settings(max_examples=5, deadline=None)
    @given(schedules(design="mydesign.py:Design", faults="crash"))
    def test_my_design_counts_attempts(chaos_session, schedule):
        chaos_session.run(schedule).assert_held("attempts-counted")

Hazard: pytest imports ``pg_job_chaos.plugin`` (so this package) in every session where pg-job-chaos
is installed, and the janitor starts as ``python -m pg_job_chaos.harness.janitor`` without the
provisioning stack: nothing is imported here; the names below load on first use.
"""

from __future__ import annotations

import importlib
from pathlib import Path

__version__ = "0.2.0"

# In a checkout (run.py, pytest, an editable install) the layers are this file's sibling folders; in a
# wheel they are sub-folders of this package. The folder list is the one pyproject.toml maps.
LAYERS = ("core", "faults", "workers", "properties", "adapters", "harness")
_HERE = Path(__file__).resolve().parent
if not (_HERE / "harness").is_dir() and (_HERE.parent / "harness" / "__init__.py").is_file():
    __path__.append(str(_HERE.parent))  # noqa: F821 -- a package's own __path__

__all__ = [
    "ChaosResult", "ChaosSession", "ChaosViolation", "Event", "HostedDesign", "JobSpec", "PROPERTIES",
    "QueueDesign", "Schedule", "Settings", "__version__", "claimed", "job_args", "load_design", "run_job",
    "schedules",
]

_HOME = {
    "ChaosResult": "results", "ChaosViolation": "results", "ChaosSession": "session", "Settings": "session",
    "schedules": "strategy", "Schedule": "core.schedule", "JobSpec": "core.schedule",
    "Event": "core.schedule",
    "HostedDesign": "workers.hosted", "run_job": "workers.hosted", "claimed": "workers.hosted",
    "job_args": "workers.hosted", "QueueDesign": "workers.builtin.base", "load_design": "workers",
    "PROPERTIES": "properties",
}


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module 'pg_job_chaos' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
