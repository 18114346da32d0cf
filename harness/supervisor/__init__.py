"""The supervisor: forks workers, strikes from outside, restarts the dead, ends every run.

In parts: :mod:`~harness.supervisor.process` (fork, die with us, reap, name the exit),
:mod:`~harness.supervisor.strikes` (the :class:`faults.api.SupervisorAPI` that supervisor faults
are written against), :mod:`~harness.supervisor.admin` (its own database session and the
``pg_stat_activity`` sampler) and :mod:`~harness.supervisor.loop` (the main loop).
"""

from .loop import Supervisor
from .process import classify
from .result import SupervisorResult

__all__ = ["Supervisor", "SupervisorResult", "classify"]
