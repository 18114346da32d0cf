"""Whether the run's server is down, since when, and how often a fault stopped it: one record.

The supervisor owns it (one per run: ``loop.py``), its strikes update it as a fault stops the server,
starts it again or begins a failover (``strikes.py``), and the loop reads it: nothing is sampled and
nothing is quiet while the server is down, no stall is declared while it recovers, and the deadline
moves by what the faults cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class ServerState:
    """The run's server as the faults left it. Times are ``time.monotonic()`` seconds."""

    # Stopped by a fault, or a failover under way (the standby cut, the primary not yet stopped): the
    # supervisor neither samples nor checks for quiescence until it starts again.
    down: bool = False
    down_since: float | None = None  # when the last stop began; None while it is up (or only cut)
    started_at: float = -math.inf  # when the last start again ended (-inf: never stopped)
    restarts: int = 0  # stops so far
    downtime: float = 0.0  # real seconds between each stop and its start again, in all

    def failing_over(self) -> None:
        """A failover began (its standby cut): down until the promotion, though the primary still runs."""
        self.down = True

    def stopping(self, now: float) -> None:
        """A fault stops the server at *now* (its stop has begun)."""
        self.down = True
        self.down_since = now
        self.restarts += 1

    def started(self, now: float) -> None:
        """The server runs again at *now* (crash recovery, or a standby promoted): up, its downtime
        counted."""
        if self.down_since is not None:
            self.downtime += now - self.down_since
        self.down = False
        self.down_since = None
        self.started_at = now

    def recovering(self, now: float, within: float) -> bool:
        """The server started again less than *within* seconds before *now* (its clients reconnect)."""
        return now - self.started_at < within

    def deadline_extension(self, per_restart: float) -> float:
        """What the stops cost the run: *per_restart* (clients' recovery) for each, and the downtime."""
        return self.restarts * per_restart + self.downtime
