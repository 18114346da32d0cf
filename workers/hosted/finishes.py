"""What a hosted library accepted, as the history keeps it (``History.hosted``, ``History.finishes``).

Under protocol v2 (:mod:`workers.hosted`) the harness's body commits its ``job_runs`` row and sends
its effect before the library's own finish runs. What the library then *accepted* -- how many
finishes it took for a job, and whose -- is read once after the run from the library's own tables by
the design's optional ``accepted_finishes(conn)`` (through its run, :class:`~workers.design.DesignRun`);
:func:`read` dates each finish on the execution log's clock so that ``library-one-finish``
(``properties/library.py``) can tell which execution it came from. The runner calls it right after
``final_states``.
"""

from __future__ import annotations

import logging
import time

from ...core.history import FINISH_OUTCOMES

log = logging.getLogger("pgjc.finishes")

CLOCKS = ("database", "worker")


CLOCK_READS = 5  # the server's clock is read this many times; the shortest round trip is kept


def clock_offsets(conn) -> dict[str, float]:
    """Seconds to subtract from an epoch time of each clock to get ``time.monotonic()`` (the execution
    log's ``t``): the server's ``clock_timestamp()``, read :data:`CLOCK_READS` times and taken from the
    read with the shortest round trip (half of it either way); the worker host's ``time.time()``."""
    reads = []
    for _ in range(CLOCK_READS):
        # Hazard: one read on a busy machine may wait long on either side of the server's clock (the
        # backend or this process descheduled): its midpoint is then off by milliseconds, more than the
        # slack library-one-finish allows a finish before the end it follows (properties/library.py).
        m0 = time.monotonic()
        (server,) = conn.execute("select extract(epoch from clock_timestamp())::float8").fetchone()
        m1 = time.monotonic()
        reads.append((m1 - m0, float(server) - (m0 + m1) / 2))
    return {"database": min(reads)[1], "worker": time.time() - time.monotonic()}


def _finish(f: dict, offsets: dict[str, float]) -> dict:
    outcome = f.get("outcome")
    clock = f.get("clock") or "database"
    at = f.get("at")
    if outcome not in FINISH_OUTCOMES:
        raise ValueError(f"finish outcome {outcome!r} is not one of {', '.join(FINISH_OUTCOMES)}")
    if clock not in CLOCKS:
        raise ValueError(f"finish clock {clock!r} is not one of {', '.join(CLOCKS)}")
    attempt = f.get("attempt")
    return {"outcome": outcome, "what": str(f.get("what") or outcome),
            "at": at.isoformat() if at is not None else None,
            "t": at.timestamp() - offsets[clock] if at is not None else None,
            "attempt": int(attempt) if attempt is not None else None, "clock": clock}


def convert(data: dict, offsets: dict[str, float]) -> list[dict]:
    """A design's ``accepted_finishes`` answer as the history keeps it: ``[{"job", "recorded",
    "complete", "finishes": [{"outcome", "what", "at" (ISO text or None), "t" (monotonic or None),
    "attempt", "clock"}]}]`` in job order; ``complete`` False where the library keeps only its last finish of
    a job (a finish it took and overwrote leaves no trace). Raises :class:`ValueError` for an outcome
    or clock the protocol does not know."""
    return [{"job": int(job), "recorded": str(entry.get("recorded") or ""),
             "complete": entry.get("complete", True) is not False,
             "finishes": [_finish(f, offsets) for f in entry.get("finishes") or ()]}
            for job, entry in sorted(data.items(), key=lambda kv: int(kv[0]))]


def read(run, conn) -> tuple[list[dict] | None, str | None]:
    """What the library of *run* (a :class:`~workers.design.DesignRun`) accepted (:func:`convert`), and a
    note for the run when it could not be read (the run stands; ``library-one-finish`` then says
    unknown). (None, None) when the design cannot tell: no ``accepted_finishes``, or one that returns
    None."""
    try:
        data = run.accepted_finishes(conn)
        return (None, None) if data is None else (convert(data, clock_offsets(conn)), None)
    except Exception as exc:
        name = run.handle.name
        log.warning("%s: accepted_finishes failed: %s", name, exc)
        return None, f"{name}'s accepted_finishes raised {type(exc).__name__}: {' '.join(str(exc).split())}"
