"""The systems under test: queue designs and tenant modes, by concept.

A **design** is how a job is claimed, worked, finished and failed (``workers/interface.py`` states the
protocol a plug-in implements, ``workers/design.py`` what each member does); a **tenant mode** is how the
tenant context is set and cleared on a pooled connection. The folders, lowest first
(``tests/unit/test_layers.py`` holds them to it):

- ``tenant/``: the tenant modes and the setting tracked per connection;
- ``body/``: the job body every design runs (one execution's steps), the statement wrapper, the
  worker context;
- ``interface.py``: the design protocol and its small types (``POOL``, ``Origin``, ``Clock``), what
  the built-in designs and the hosting implement;
- ``builtin/``: the article's designs; ``hosted/``: a queue library, a user's own worker, the worker
  contract (its clients in other runtimes under ``clients/``);
- ``design.py`` (the boundary: the handle, every optional member resolved) and ``loading.py``
  (``load_design``, the one module that knows designs by name).

The flat modules' old names still import, deprecated (``workers/moved.py``).
"""

from __future__ import annotations

from . import moved
from .builtin.base import QueueDesign
from .design import DesignHandle, DesignRun
from .interface import Clock, Design, Origin
from .loading import BUILTIN, LIBRARIES, LIBRARIES_EXTRA, OTHER_RUNTIMES, load_design, parse_options
from .tenant.modes import MODES, TenantMode, check_schedule

moved.install(__name__)  # the flat modules' old names (workers/moved.py), deprecated

DESIGNS = BUILTIN  # the built-in designs by name

__all__ = ["DESIGNS", "LIBRARIES", "LIBRARIES_EXTRA", "MODES", "OTHER_RUNTIMES", "Clock", "Design",
           "DesignHandle", "DesignRun", "Origin", "QueueDesign", "TenantMode", "check_schedule",
           "load_design", "parse_options"]
