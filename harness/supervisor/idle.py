"""The sooner end of a run: every live worker has looked for work again since the last record.

The supervisor's timed rule ends a run once nothing is pending and nothing is in flight for two poll
intervals. :class:`LookedAgain` ends it as soon as every live worker's idle mark (``core/idlemark.py``:
when its last look for work that found nothing began, written after that look's sweep) is newer than
the newest execution-log record, nothing is in flight, and the design's pending count, asked after
the marks were read, is 0. A worker that writes no mark (a hosted library's loop, a user's) keeps it
from deciding: the timed rule alone ends such a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ...core import idlemark
from ...core.events import LogEvent

# Records about a statement, not a step of a job or a worker: a job's statements come between its started
# and its end (in flight), a job-less one is part of a look for work (an idle mark follows it); the empty
# look after a job logs the claim once more under that job (workers/body/statements.py keeps the last job).
NOT_ACTIVITY = frozenset({LogEvent.STATEMENT, LogEvent.TENANT_STATEMENT})


class LookedAgain:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.last_record_t = float("-inf")  # the newest activity record's t (monotonic, any worker)
        self._own_t: dict[str, float] = {}  # each worker's newest activity record's t
        self._woken: object = None  # the newest activity the sleepers were last woken after
        self._tried: dict[str, float] | None = None  # the marks a pending query last found busy

    def saw(self, record: dict) -> None:
        """An execution-log record read: activity unless it is about a statement."""
        if record.get("event") not in NOT_ACTIVITY and isinstance(t := record.get("t"), float | int):
            self.last_record_t = max(self.last_record_t, float(t))
            if isinstance(who := record.get("worker"), str):
                self._own_t[who] = max(self._own_t.get(who, float("-inf")), float(t))

    def over(self, live: Iterable, quiet: Callable[[], bool]) -> bool:
        """Whether the run is over by the marks of *live* (the live workers); *quiet* is the
        supervisor's own check (nothing in flight, nothing stopped, nothing pending), asked once per
        new set of marks."""
        marks = {}
        for w in live:
            if w.current:
                return False
            mark = idlemark.read(self.run_dir, w.identity)
            if mark is None or mark <= self.last_record_t:
                return False
            marks[w.identity] = mark
        if not marks or marks == self._tried:
            return False
        self._tried = marks
        return quiet()

    def sleepers(self, live: Iterable, quiet: Callable[[], bool]) -> list:
        """The live workers to wake now: none unless no worker is in a job, each writes marks, some
        mark is older than the newest activity record and *quiet* (asked at most once per newest
        record) says the run is quiet; then those whose mark is older than that record but newer
        than their own last activity record -- between two looks, asleep."""
        marks = []
        for w in live:
            mark = idlemark.read(self.run_dir, w.identity)
            if w.current or mark is None:
                return []
            marks.append((w, mark))
        asleep = [w for w, m in marks if self._own_t.get(w.identity, float("-inf")) < m <= self.last_record_t]
        if not asleep or self._woken == self.last_record_t:
            return []
        self._woken = self.last_record_t
        return asleep if quiet() else []
