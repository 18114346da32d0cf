"""The systems under test: queue designs and tenant modes.

A **design** is how a job is claimed, worked, finished and failed (``workers/base.py`` states the
protocol a plug-in implements); a **tenant mode** is how the tenant context is set and cleared on
a pooled connection (``workers/tenant.py``). The job body they all run is ``workers/body.py``.
"""

from __future__ import annotations

import importlib

from core.errors import UsageError
from workers.base import PROTOCOL, QueueDesign
from workers.heartbeat import LeaseHeartbeat
from workers.lease import Lease, LeaseFenced
from workers.one_transaction import OneTransaction, OneTransactionHandler
from workers.tenant import MODES, TenantMode, check_schedule

DESIGNS = {d.name: d for d in (OneTransaction, OneTransactionHandler, Lease, LeaseFenced, LeaseHeartbeat)}

__all__ = ["DESIGNS", "MODES", "QueueDesign", "TenantMode", "check_schedule", "load_design"]


def load_design(spec: str):
    """A built-in design by name, or ``package.module:attr`` (a class is instantiated).

    Raises :class:`UsageError` naming what is missing when the object does not fit the protocol.
    """
    if spec in DESIGNS:
        return DESIGNS[spec]()
    if ":" not in spec:
        raise UsageError(f"unknown design {spec!r}; built-in designs: {', '.join(DESIGNS)}; "
                         "or give package.module:attr")
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
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
