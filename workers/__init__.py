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

from core.errors import UsageError
from workers.base import PROTOCOL, QueueDesign
from workers.heartbeat import LeaseHeartbeat
from workers.lease import Lease, LeaseFenced
from workers.one_transaction import OneTransaction, OneTransactionHandler
from workers.outbox import LeaseOutbox
from workers.tenant import MODES, TenantMode, check_schedule

DESIGNS = {d.name: d for d in (OneTransaction, OneTransactionHandler, Lease, LeaseFenced, LeaseHeartbeat,
                                        LeaseOutbox)}

__all__ = ["DESIGNS", "MODES", "QueueDesign", "TenantMode", "check_schedule", "load_design"]


def _import(module_name: str):
    """``package.module`` (from the current directory too, as ``python -m`` would) or a file path
    ``path/to/file.py`` (its directory goes on ``sys.path`` so it can import its neighbours)."""
    if module_name.endswith(".py") or os.sep in module_name:
        path = Path(module_name).expanduser().resolve()
        if not path.is_file():
            raise ImportError(f"no file {path}")
        name = f"pgjc_design_{path.stem}_{abs(hash(str(path))):x}"
        if name in sys.modules:
            return sys.modules[name]
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
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


def load_design(spec: str):
    """A built-in design by name, ``package.module:attr`` or ``path/to/file.py:attr`` (a class is
    instantiated).

    Raises :class:`UsageError` naming the module and what went wrong when it cannot be imported
    (its own code raised, too), or what is missing when the object does not fit the protocol.
    """
    if spec in DESIGNS:
        return DESIGNS[spec]()
    if ":" not in spec:
        raise UsageError(f"unknown design {spec!r}; built-in designs: {', '.join(DESIGNS)}; "
                         "or give package.module:attr or path/to/file.py:attr")
    module_name, _, attr = spec.rpartition(":")
    try:
        module = _import(module_name)
    except ImportError as exc:
        raise UsageError(f"--design {spec}: cannot import {module_name}: {exc}") from None
    except Exception as exc:  # the plug-in's own code failed at import: the user's to fix, not ours
        raise UsageError(f"--design {spec}: importing {module_name} raised {type(exc).__name__}: {exc}") from None
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise UsageError(f"--design {spec}: module {module_name} has no attribute {attr!r}") from None
    if isinstance(obj, type):
        obj = obj()
    missing = [m for m in PROTOCOL if not hasattr(obj, m)]
    if missing:
        raise UsageError(f"--design {spec} does not fit the design protocol: missing {', '.join(missing)} "
                         "(see workers/base.py)")
    not_callable = [m for m in PROTOCOL[2:] if not callable(getattr(obj, m))]
    if not_callable:
        raise UsageError(f"--design {spec}: {', '.join(not_callable)} must be callable")
    return obj
