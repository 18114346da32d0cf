"""The base layer: what every other part of pg-job-chaos imports, and which imports none of them.

* :mod:`core.errors` -- one exception tree and the exit codes;
* :mod:`core.sqlfile` -- named SQL statements in ``.sql`` files, resolved at import; :mod:`core.db`,
  the row of a statement that always returns one;
* :mod:`core.schedule` -- a run as plain data (jobs, events, timing), JSON round-trippable, and the
  named strike points of a job's life;
* :mod:`core.execlog` -- the execution log, what each execution did in the world; :mod:`core.events`, the
  names of its events, of the supervisor's injected records and of the ways a run ends (one registry: a
  misspelt name raises);
* :mod:`core.server` -- what a PostgreSQL back end can do (restart, replicate), as typed protocols;
* :mod:`core.history` -- everything one run did, and the executions derived from it;
* :mod:`core.logs`, :mod:`core.procs`, :mod:`core.cleanup` -- logging safe under SIGKILL, process
  helpers (die with the parent, process start time, stop a server), cleanup that keeps the first error.

Layers above: :mod:`faults` (the fault catalogue), then :mod:`workers` and :mod:`properties`, then
:mod:`harness` (orchestration). ``tests/unit/test_layers.py`` keeps the rule.
"""

from .errors import ChaosError, HarnessError, UsageError
from .history import History
from .schedule import POINTS, Event, JobSpec, Schedule, Timing

__all__ = ["POINTS", "ChaosError", "Event", "HarnessError", "History", "JobSpec", "Schedule", "Timing",
           "UsageError"]
