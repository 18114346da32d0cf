"""Loading a design by name or spec, once: :func:`load_design` returns its
:class:`~workers.design.DesignHandle`, carrying where the design came from
(:class:`~workers.interface.Origin`: built-in, library, plug-in). This is the one module that knows
designs by name: every other reads the handle.

A built-in design by name (:data:`BUILTIN`), a hosted library by name (:data:`LIBRARIES`), or a plug-in
as ``package.module:attr`` or ``path/to/file.py:attr``; the ``--design-option`` strings are the keyword
arguments it is built with.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Protocol, cast

from ..core.errors import UsageError
from .builtin.base import QueueDesign
from .builtin.fair import LeaseRoundRobin, LeaseTenantCap
from .builtin.heartbeat import LeaseHeartbeat
from .builtin.lease import Lease, LeaseFenced
from .builtin.one_transaction import OneTransaction, OneTransactionHandler
from .builtin.outbox import LeaseOutbox
from .design import DesignHandle
from .interface import Origin

BUILTIN: dict[str, type[QueueDesign]] = {
    d.name: d
    for d in (OneTransaction, OneTransactionHandler, Lease, LeaseFenced, LeaseHeartbeat, LeaseOutbox,
              LeaseRoundRobin, LeaseTenantCap)}

# Real queue libraries, hosted by the adapters (``adapters/``), and the worker contract: by ``module:attr``,
# as plug-ins are named. Importing one needs its library (the ``libraries`` extra) or its runtime.
LIBRARIES = {
    "procrastinate": "pg_job_chaos.adapters.procrastinate:Procrastinate",
    "pgqueuer": "pg_job_chaos.adapters.pgqueuer:PgQueuer",
    "chancy": "pg_job_chaos.adapters.chancy:Chancy",
    "awa": "pg_job_chaos.adapters.awa:Awa",
    "dbos": "pg_job_chaos.adapters.dbos:Dbos",
    "django-tasks-db": "pg_job_chaos.adapters.django_tasks:DjangoTasks",
    "contract": "pg_job_chaos.workers.hosted.contract:ContractDesign",  # any runtime: command="..."
    "pg-boss": "pg_job_chaos.adapters.pgboss:PgBoss",  # Node, through the contract
    "graphile-worker": "pg_job_chaos.adapters.graphile:GraphileWorker",  # Node, through the contract
    "oban": "pg_job_chaos.adapters.oban:Oban",  # Python 3.12, through the contract
    "river": "pg_job_chaos.adapters.river:River",  # Go, through the contract (workers/clients/go)
    "db-scheduler": "pg_job_chaos.adapters.db_scheduler:DbScheduler",  # JVM, through the contract
}
# Hosted in another runtime through the worker contract: not the libraries extra's.
OTHER_RUNTIMES = ("contract", "pg-boss", "oban", "graphile-worker", "river", "db-scheduler")
LIBRARIES_EXTRA = "pip install 'pg-job-chaos[libraries]'"  # in a checkout: pip install -e '.[libraries]'


class _Factory(Protocol):
    def __call__(self, **options: str) -> object: ...


def parse_options(pairs: Iterable[str] | None) -> dict[str, str]:
    """``--design-option key=value`` strings as a dict; :class:`UsageError` for one without ``=``."""
    out = {}
    for pair in pairs or ():
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--design-option {pair!r}: expected key=value")
        out[key.strip()] = value
    return out


def load_design(spec: str, options: Mapping[str, str] | None = None) -> DesignHandle:
    """A built-in design by name, a hosted library by name (:data:`LIBRARIES`), ``package.module:attr``
    or ``path/to/file.py:attr``, built once: a class or a factory function is called with *options*
    (the ``--design-option`` strings) as keyword arguments; an object given as it is takes none.

    Raises :class:`UsageError` naming the module and what went wrong when it cannot be imported
    (its own code raised, too), when the options do not fit, or what is missing when the object does
    not fit :class:`Design`.
    """
    options = dict(options or {})
    if spec in BUILTIN:
        built = _configured(BUILTIN[spec], spec, options)
        return DesignHandle.of(built, spec, options, origin=Origin.BUILTIN)
    target = LIBRARIES.get(spec, spec)
    if ":" not in target:
        raise UsageError(f"unknown design {spec!r}; built-in designs: {', '.join(BUILTIN)}; libraries: "
                         f"{', '.join(LIBRARIES)}; or give package.module:attr or path/to/file.py:attr")
    module_name, _, attr = target.rpartition(":")
    try:
        module = _import(module_name)
    except ImportError as exc:
        # The hint only when the library is what is missing, not the adapter module or its package.
        parts = module_name.split(".")
        own = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        missing_library = spec in LIBRARIES and exc.name not in own
        hint = f" (the hosted libraries install with {LIBRARIES_EXTRA})" if missing_library else ""
        raise UsageError(f"--design {spec}: cannot import {module_name}: {exc}{hint}") from None
    except Exception as exc:  # the plug-in's own code failed at import: the user's to fix, not ours
        raise UsageError(f"--design {spec}: importing {module_name} raised {type(exc).__name__}: "
                         f"{exc}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise UsageError(f"--design {target}: module {module_name} has no attribute {attr!r}") from None
    return DesignHandle.of(_configured(obj, target, options), spec, options, origin=origin_of(spec))


def origin_of(spec: str) -> Origin:
    """Where the design *spec* names comes from: a built-in design by name; a hosted library's adapter
    or the worker contract, by name (:data:`LIBRARIES`) or by the ``module:attr`` a name stands for (as
    ``pg_job_chaos.adapters.awa:Awa``); anything else is a plug-in, the user's code."""
    if spec in BUILTIN:
        return Origin.BUILTIN
    if spec in LIBRARIES or spec in LIBRARIES.values():
        return Origin.LIBRARY
    return Origin.PLUGIN


def _import(module_name: str) -> ModuleType:
    """``package.module`` (from the current directory too, as ``python -m`` would) or a file path
    ``path/to/file.py`` (its directory goes on ``sys.path`` so it can import its neighbours, and the
    current directory after it, so it can import packages from the project's root as well)."""
    if module_name.endswith(".py") or os.sep in module_name:
        path = Path(module_name).expanduser().resolve()
        if not path.is_file():
            raise ImportError(f"no file {path}")
        name = f"pgjc_design_{path.stem}_{abs(hash(str(path))):x}"
        if name in sys.modules:
            return sys.modules[name]
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        if os.getcwd() not in sys.path:  # after the file's directory: its neighbours come first
            sys.path.insert(sys.path.index(str(path.parent)) + 1, os.getcwd())
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    return importlib.import_module(module_name)


def _configured(obj: object, spec: str, options: dict[str, str]) -> object:
    """*obj* built with *options*: a class or a factory is called; an instance must get none."""
    is_factory = callable(obj) and not hasattr(obj, "run_worker")
    if not isinstance(obj, type) and not is_factory:
        if options:
            raise UsageError(f"--design {spec} is an object, not a class or factory: it takes no "
                             "--design-option")
        return obj
    try:
        factory = cast(_Factory, obj)
        return factory(**options)
    except UsageError:
        raise
    except TypeError as exc:
        given = ", ".join(options) or "none"
        raise UsageError(f"--design {spec}: cannot be built with the options given ({given}): "
                         f"{exc}") from None
    except Exception as exc:
        raise UsageError(f"--design {spec}: building it raised {type(exc).__name__}: {exc}") from None
