"""The systems under test: queue designs and tenant modes.

A **design** is how a job is claimed, worked, finished and failed (``workers/base.py`` states the
protocol a plug-in implements); a **tenant mode** is how the tenant context is set and cleared on
a pooled connection (``workers/tenant.py``). The job body they all run is ``workers/body.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from ..core.errors import UsageError
from .base import PROTOCOL, QueueDesign
from .heartbeat import LeaseHeartbeat
from .lease import Lease, LeaseFenced
from .one_transaction import OneTransaction, OneTransactionHandler
from .outbox import LeaseOutbox
from .tenant import MODES, TenantMode, check_schedule

DESIGNS = {d.name: d for d in (OneTransaction, OneTransactionHandler, Lease, LeaseFenced, LeaseHeartbeat,
                                        LeaseOutbox)}

# Real queue libraries, hosted by the adapters in ``adapters/`` (protocol v2, ``workers/hosted.py``).
# Named here as plug-ins are, by ``module:attr``: importing one needs its library (the ``libraries`` extra).
LIBRARIES = {
    "procrastinate": "pg_job_chaos.adapters.procrastinate:Procrastinate",
    "pgqueuer": "pg_job_chaos.adapters.pgqueuer:PgQueuer",
    "chancy": "pg_job_chaos.adapters.chancy:Chancy",
    "awa": "pg_job_chaos.adapters.awa:Awa",  # awa-pg, a fenced finish (run_lease)
    "dbos": "pg_job_chaos.adapters.dbos:Dbos",  # DBOS Transact: durable workflows, recovery by executor id
    # any runtime, through a subprocess client (docs/contract.md): --design-option command="..."
    "contract": "pg_job_chaos.workers.contract:ContractDesign",
    "pg-boss": "pg_job_chaos.adapters.pgboss:PgBoss",
    "oban": "pg_job_chaos.adapters.oban:Oban",  # Python 3.12, through the contract  # Node, through the contract (npm ci, workers/clients/node)
    "django-tasks-db": "pg_job_chaos.adapters.django_tasks:DjangoTasks",  # django-tasks-db on Django 5.2 + the django-tasks backport
    "graphile-worker": "pg_job_chaos.adapters.graphile:GraphileWorker",  # Node, through the contract
}
# Hosted in another runtime through the worker contract (workers/contract.py): not the libraries extra's.
OTHER_RUNTIMES = ("contract", "pg-boss", "oban", "graphile-worker")
LIBRARIES_EXTRA = "pip install 'pg-job-chaos[libraries]'"  # in a checkout: pip install -e '.[libraries]'

__all__ = ["DESIGNS", "LIBRARIES", "MODES", "QueueDesign", "TenantMode", "check_schedule", "load_design",
           "parse_options"]


def _import(module_name: str):
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


def parse_options(pairs) -> dict[str, str]:
    """``--design-option key=value`` strings as a dict; :class:`UsageError` for one without ``=``."""
    out = {}
    for pair in pairs or ():
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--design-option {pair!r}: expected key=value")
        out[key.strip()] = value
    return out


def load_design(spec: str, options: dict[str, str] | None = None):
    """A built-in design by name, a hosted library by name (:data:`LIBRARIES`), ``package.module:attr``
    or ``path/to/file.py:attr``. A class or a factory function is called with *options* (the
    ``--design-option`` strings) as keyword arguments; an object given as it is takes none.

    Raises :class:`UsageError` naming the module and what went wrong when it cannot be imported
    (its own code raised, too), when the options do not fit, or what is missing when the object does
    not fit the protocol.
    """
    options = dict(options or {})
    if spec in DESIGNS:
        return _configured(DESIGNS[spec], spec, options)
    library = spec in LIBRARIES
    given = spec  # the messages name what the user typed: --design procrastinate, not its adapter
    if library:
        spec = LIBRARIES[spec]
    if ":" not in spec:
        raise UsageError(f"unknown design {spec!r}; built-in designs: {', '.join(DESIGNS)}; libraries: "
                         f"{', '.join(LIBRARIES)}; or give package.module:attr or path/to/file.py:attr")
    module_name, _, attr = spec.rpartition(":")
    try:
        module = _import(module_name)
    except ImportError as exc:
        # The hint only when the library is what is missing, not the adapter module or its package.
        parts = module_name.split(".")
        own = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        missing_library = library and exc.name not in own
        hint = f" (the hosted libraries install with {LIBRARIES_EXTRA})" if missing_library else ""
        raise UsageError(f"--design {given}: cannot import {module_name}: {exc}{hint}") from None
    except Exception as exc:  # the plug-in's own code failed at import: the user's to fix, not ours
        raise UsageError(f"--design {given}: importing {module_name} raised {type(exc).__name__}: {exc}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise UsageError(f"--design {spec}: module {module_name} has no attribute {attr!r}") from None
    obj = _configured(obj, spec, options)
    missing = [m for m in PROTOCOL if not hasattr(obj, m)]
    if missing:
        raise UsageError(f"--design {spec} does not fit the design protocol: missing {', '.join(missing)} "
                         "(see workers/base.py and workers/hosted.py)")
    not_callable = [m for m in PROTOCOL[2:] if not callable(getattr(obj, m))]
    if not_callable:
        raise UsageError(f"--design {spec}: {', '.join(not_callable)} must be callable")
    return obj


def _configured(obj, spec: str, options: dict[str, str]):
    """*obj* built with *options*: a class or a factory is called; an instance must get none."""
    is_factory = callable(obj) and not hasattr(obj, "run_worker")
    if not isinstance(obj, type) and not is_factory:
        if options:
            raise UsageError(f"--design {spec} is an object, not a class or factory: it takes no --design-option")
        return obj
    try:
        return obj(**options)
    except UsageError:
        raise
    except TypeError as exc:
        given = ", ".join(options) or "none"
        raise UsageError(f"--design {spec}: cannot be built with the options given ({given}): {exc}") from None
    except Exception as exc:
        raise UsageError(f"--design {spec}: building it raised {type(exc).__name__}: {exc}") from None
