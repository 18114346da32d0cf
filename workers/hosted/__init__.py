"""Hosting code the harness did not write: a real queue library, a user's own worker, a worker in
another runtime.

``protocol`` is the hosting protocol (:class:`HostedDesign`, :func:`run_job`: what an adapter or a
user's design implements and calls); ``declared`` builds a design's reads from a status map and
named SQL, as the adapters and the contract declare them; ``own_connection`` observes a body on the
worker's own connection; ``timing`` holds a library's intervals as data; ``finishes`` reads what a
library accepted into the history; ``spawned`` runs a library's worker as a child process;
``contract`` is the worker contract, for a worker in any runtime (its clients are ``workers/clients/``).

This package sits beside the built-in designs and imports none of them: both build on the job body
(``workers/body/execution.py``). The names below are the protocol's, so ``from pg_job_chaos.workers import
hosted`` then ``hosted.HostedDesign`` reads as it always has.
"""

from __future__ import annotations

from .protocol import (
    HOSTED_POINTS,
    STATES,
    HostedDesign,
    Jsonb,
    claimed,
    job_args,
    record_ids,
    run_job,
    schedule_ids,
)

__all__ = ["HOSTED_POINTS", "STATES", "HostedDesign", "Jsonb", "claimed", "job_args", "record_ids", "run_job",
           "schedule_ids"]
