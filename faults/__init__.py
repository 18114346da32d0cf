"""The fault catalogue: every fault the harness can inject, what it does, and where it strikes.

Two kinds:

* **job** faults travel with a job (``JobSpec.fault``) and strike inside the worker at a named
  point of the job's life (:data:`POINTS`): ``raise``, ``sql-error``, ``crash``, ``hang``,
  ``overrun``, ``slow``.
* **supervisor** faults are ``Event`` entries of a schedule: when an execution of the event's job
  reaches the event's point, the worker stops there and tells the supervisor, which strikes from
  outside (``kill``, ``pause``, ``horizon``, ``terminate``) and then lets the worker go on. The
  trigger is what the history shows, never a wall-clock guess, so a schedule replays the same way.

Adding a fault is adding one :class:`Fault` to :data:`CATALOGUE`; a supervisor fault is written
against :class:`SupervisorAPI`, the typed interface the supervisor offers (``faults/api.py``), and
its entry declares what a run needs for it (``needs_one_slot``, ``needs_durable_settings``,
``needs_local_server``, ``network``, ``needs_root_nftables``, ...): the harness reads those, never the
fault's name.
"""

from __future__ import annotations

from ..core.schedule import POINTS
from .api import Stop, SupervisorAPI
from .catalogue import CATALOGUE, Fault, check_schedule, parse_faults

__all__ = ["CATALOGUE", "POINTS", "Fault", "Stop", "SupervisorAPI", "check_schedule", "parse_faults"]
