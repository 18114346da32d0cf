"""The systems under test: queue designs and tenant modes.

A **design** is how a job is claimed, worked, finished and failed (``workers/design.py`` states the
protocol a plug-in implements); a **tenant mode** is how the tenant context is set and cleared on
a pooled connection (``workers/tenant.py``). The job body they all run is ``workers/body.py``.
"""

from __future__ import annotations

from .base import QueueDesign
from .design import Design, DesignHandle, DesignRun
from .loading import BUILTIN, LIBRARIES, LIBRARIES_EXTRA, OTHER_RUNTIMES, load_design, parse_options
from .tenant import MODES, TenantMode, check_schedule

DESIGNS = BUILTIN  # the built-in designs by name

__all__ = ["DESIGNS", "LIBRARIES", "LIBRARIES_EXTRA", "MODES", "OTHER_RUNTIMES", "Design", "DesignHandle",
           "DesignRun", "QueueDesign", "TenantMode", "check_schedule", "load_design", "parse_options"]
