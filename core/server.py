"""What a PostgreSQL back end can do besides serve connections: its capabilities, as typed protocols.

A back end the harness provisions (``harness.postgres``) offers what its kind can: the local server
is :class:`Restartable` (the restart fault stops it as a crash does and starts it again); the
replicated back end's pair is :class:`Replicated` (the failover faults cut its standby, stop its
primary and promote the standby, cleanly or not). ``harness.postgres.Database`` names each
capability it has (``control``, ``replica``), None for one it lacks; the supervisor's
``faults.api.SupervisorAPI`` passes them on to the faults as typed members. Nobody asks a server
object what it can do (no ``getattr``): a capability is a type.

The protocols live in the base layer so that the fault layer can type its interface with them and
the harness can implement them; the results are frozen dataclasses, never dicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Janitor(Protocol):
    """What a server tells about the processes it starts and stops (``harness.janitor.Janitor``): they
    are killed with the harness if it dies."""

    def register(self, op: str, **fields: object) -> str: ...

    def forget(self, key: str) -> None: ...


class Restartable(Protocol):
    """A server the harness may stop and start again (the restart fault; a failover's two halves)."""

    def crash(self, janitor: Janitor | None = None) -> None:
        """Stop as a crash does (immediate mode): every session breaks, what is committed stays."""

    def start_again(self, janitor: Janitor | None = None) -> None:
        """Start again after :meth:`crash` (crash recovery); a ``HarnessError`` when it does not."""


@dataclass(frozen=True)
class Cut:
    """A standby's WAL receiver, cut: what the primary had written when it stopped receiving."""

    primary_lsn: str  # pg_current_wal_lsn() on the primary before the cut


@dataclass(frozen=True)
class Promotion:
    """A standby promoted: how long the pair had no primary."""

    seconds: float  # real seconds from the primary's stop to the promotion's end


class Replicated(Restartable, Protocol):
    """A primary and its streaming standby. :meth:`crash` stops the primary (immediate, or clean once a
    switchover is armed) and :meth:`start_again` promotes the standby. Every fault-side method answers
    for a pair with no standby left (a second failover in one run) without acting: None, False, ()."""

    @property
    def mode(self) -> str:
        """``async`` or ``sync`` (commits wait for the standby)."""

    @property
    def promotions(self) -> Sequence[float]:
        """Every promotion's seconds so far (:class:`Promotion`), oldest first."""

    @property
    def resets(self) -> Sequence[float]:
        """Every :meth:`settle` that rewound the old primary: its seconds, oldest first."""

    def cut_standby(self) -> Cut | None:
        """The standby stops receiving WAL (returns once its receiver is gone); it keeps what it has.
        None: no standby."""

    def arm_switchover(self) -> bool:
        """The next :meth:`crash` is a clean stop: the standby receives all WAL first. False: no standby."""

    def cancel_commit_waits(self) -> tuple[int, ...]:
        """Cancel every commit that waits for the standby (``sync``), as a client's cancel request does;
        the backends cancelled. Empty with no standby, or once the primary stopped."""

    def demote_in_place(self) -> Promotion | None:
        """Promote the standby with the primary left up, its open sessions kept, and every transaction
        that starts on it from now on read-only (a managed database's role flip); new connections reach
        the new primary. None: no standby."""

    def last_promotion(self) -> Promotion | None:
        """The newest promotion; None before the first."""

    def settle(self) -> float | None:
        """Between runs: make the pair whole and caught up (the old primary rewound into the standby, a
        cut receiver reconnected). The seconds it took when it rewound, else None."""

    def one_host_dsn(self, dsn: str) -> str:
        """*dsn* for a client that takes one host: through an endpoint that follows the primary."""
