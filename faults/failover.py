"""The failover faults: the primary of the replicated back end (``--replica``) fails over to its
standby while a job runs. Each strikes when an execution reaches the event's point -- a named point of
a job's life or a design's statement point (``sql:<name>``) -- so a search places it before or after a
finish like any other fault.

Variants of ``failover`` (``Event.variant``):

* ``lagging``: the standby's WAL receiver is cut at the point (it keeps what it has), the worker goes
  on, and after the event's duration the primary stops in immediate mode and the standby is promoted.
  What committed on the primary between the cut and the stop -- acknowledged to its client -- is not
  on the new primary: the lost commit a failover of a lagging asynchronous replica makes.
* ``switchover``: at the point the primary stops cleanly (PostgreSQL sends the standby all its WAL
  first) and the standby is promoted: nothing committed is lost; only sessions break.
* ``demote-in-place``: a managed database's role flip, as its clients see it (river #1225). At the
  point every transaction that starts on the primary from then on is read-only
  (``default_transaction_read_only``, reloaded), the standby -- once it replayed the primary's WAL as
  of that moment -- is promoted, and the endpoint sends new connections to it; the old primary stays
  up with its sessions open, so a client that keeps its connection gets "cannot execute UPDATE in a
  read-only transaction" until it reconnects. A transaction already under way on the old node may
  still commit there: that write is not on the new primary. The old node is stopped and rewound into
  the standby between runs.

``failover-cancel`` is ``lagging`` with every commit that waits for the standby (``--replica sync``)
cancelled while the receiver is cut, as a client's cancel request does: PostgreSQL answers such a
COMMIT with OK and a warning that it "might not have been replicated", and the promotion loses it.
On ``--replica async`` nothing waits, and it is ``lagging``.

Every step is a record in the history (a :class:`~core.events.FaultStep`): ``failover`` (the cut, or the
switchover's or demote's start), each ``commit-wait-cancelled``, ``primary-stopped`` (``primary-demoted``
for a demote-in-place), ``promoted`` (with the
promotion's seconds), or ``failover-skipped`` when the pair has no standby left (a second failover in one
run). ``History.promotions`` reads them back.
"""

from __future__ import annotations

import time

from ..core.events import FaultStep
from ..core.schedule import Event
from .api import Stop, SupervisorAPI

CANCEL_POLL = 0.02  # real seconds between looks for commits waiting for the standby


def _promote(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    sup.record(FaultStep.PRIMARY_STOPPED, event, stop)  # before: the record's time is when the stop began
    sup.stop_server()  # the pair's primary: immediate (lagging), or clean (switchover)
    sup.start_server()  # promotes the standby; the supervisor's session reconnects to it
    promotion = sup.last_promotion()
    sup.record(FaultStep.PROMOTED, event, stop, seconds=promotion.seconds if promotion is not None else None)


def failover(sup: SupervisorAPI, event: Event, stop: Stop) -> None:
    """The ``failover`` fault (and ``failover-cancel``): see the module's docstring."""
    struck = FaultStep(event.fault)  # failover or failover-cancel: the strike's record is the fault's name
    # any other variant is lagging: lagging (the default), and the xid that events saved before the
    # default was the fault's own carry
    if event.variant == "demote-in-place":
        began = time.monotonic()  # the supervisor's clock: the demoted record's time is when it began
        promotion = sup.demote_primary()
        if promotion is None:
            sup.record(FaultStep.FAILOVER_SKIPPED, event, stop, variant=event.variant)
        else:
            sup.record(struck, event, stop, variant="demote-in-place", t=began)
            sup.record(FaultStep.PRIMARY_DEMOTED, event, stop, t=began)
            sup.record(FaultStep.PROMOTED, event, stop, seconds=promotion.seconds)
        sup.go(stop)
        return
    if event.variant == "switchover":
        if not sup.arm_switchover():
            sup.record(FaultStep.FAILOVER_SKIPPED, event, stop, variant=event.variant)
            sup.go(stop)
            return
        sup.record(struck, event, stop, variant="switchover")
        _promote(sup, event, stop)
        sup.go(stop)
        return
    cut = sup.cut_standby()
    if cut is None:
        sup.record(FaultStep.FAILOVER_SKIPPED, event, stop, variant=event.variant)
        sup.go(stop)
        return
    duration = sup.event_seconds(event)
    sup.record(struck, event, stop, variant="lagging", seconds=duration, primary_lsn=cut.primary_lsn)
    done: list[bool] = []  # the promotion ran: the cancel polling stops

    def cancel() -> None:
        if done:
            return
        cancelled = sup.cancel_commit_waits()
        if cancelled:
            sup.record(FaultStep.COMMIT_WAIT_CANCELLED, event, stop, backends=list(cancelled))
        sup.later(CANCEL_POLL, cancel)

    def promote() -> None:
        if struck == FaultStep.FAILOVER_CANCEL:
            cancel()
        done.append(True)
        _promote(sup, event, stop)

    if struck == FaultStep.FAILOVER_CANCEL:
        sup.later(CANCEL_POLL, cancel)
    sup.later(duration, promote)
    sup.go(stop)
