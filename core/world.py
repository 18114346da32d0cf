"""The world outside the database: where external effects land, and how it answers a send.

A send **without** an idempotency key is always accepted (an e-mail sent is sent). A send **with**
a key is accepted the first time the world sees the key and acknowledged, not done again, every
later time -- as payment and e-mail providers do. The world's memory of keys is one file per key
in the run directory, created with ``O_CREAT | O_EXCL``: atomic across every worker process, and
it survives the sender's ``os._exit`` or SIGKILL.

Both sides go to the sender's execution log (``core.execlog``): an ``effect`` record (the send,
with its ``key``) before the world is asked, then ``accepted`` or ``duplicate`` (the answer).
A sender killed between the two leaves a send without an answer; the properties count it as
possibly accepted (``core.history.History.effects``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .events import LogEvent
from .execlog import ExecLog


class World:
    """The world as one run's workers see it; every process of the run shares its key directory."""

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir) / "world"
        self.dir.mkdir(exist_ok=True)

    def send(self, log: ExecLog, *, job: int, attempt: int, key: str, **fields: object) -> bool:
        """Send one keyed effect of *job*: True when the world accepted it (first time it saw *key*),
        False when it acknowledged a repeat. Both the send and the answer are logged."""
        log.write(LogEvent.EFFECT, job=job, attempt=attempt, key=key, **fields)
        name = hashlib.sha256(key.encode()).hexdigest()  # any key is a safe file name this way
        try:
            os.close(os.open(self.dir / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            accepted = True
        except FileExistsError:
            accepted = False
        log.write(LogEvent.ACCEPTED if accepted else LogEvent.DUPLICATE,
                  job=job, attempt=attempt, key=key, **fields)
        return accepted
