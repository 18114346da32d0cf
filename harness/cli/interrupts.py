"""Interrupts that end a command cleanly: SIGTERM unwinds as Ctrl-C does (:class:`Terminated`), and
an interrupt Python dropped is delivered again (:func:`not_lost`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwinding like Ctrl-C does, so every ``finally`` runs: workers killed, server
    stopped, temp directory removed (the janitor would do it too, but a clean exit says so itself).

    Hazard: it must be a KeyboardInterrupt. Hypothesis treats a SystemExit raised inside a test as
    the test failing (deterministic, like any exception), so a SystemExit here ended a search early
    and reported "held" with exit 0; a KeyboardInterrupt it lets through."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum
        self.exit_code = 128 + signum


def terminated(signum: int, frame: object) -> None:
    """The SIGTERM handler: raise :class:`Terminated`."""
    raise Terminated(signum)


REDELIVER_AFTER = 0.01  # seconds after a lost interrupt before its signal is delivered again


@contextlib.contextmanager
def not_lost() -> Iterator[None]:
    """While the command runs, a Ctrl-C (KeyboardInterrupt) or SIGTERM (:class:`Terminated`) that
    Python lost is delivered again.

    Hazard: a signal's handler runs at the next bytecode of the main thread, wherever that is. When
    it is in code whose exceptions Python can only print and drop -- a garbage-collector callback
    (Hypothesis installs one, to time its examples), a ``__del__``, a weakref callback -- the
    interrupt ends in ``sys.unraisablehook`` ("Exception ignored in: <function
    gc_cumulative_time.<locals>.gc_callback ...> KeyboardInterrupt") and the search ran on to its
    end: 2 of 25 SIGINTs on a loaded 2-core machine. Such an interrupt's signal is sent again to the
    main thread (``signal.pthread_kill`` from a short timer thread: never from inside the hook, where
    its handler would run at once and be lost again; a real signal, so a blocking call returns), and
    its handler raises it in ordinary code; one lost again is sent again."""
    pid = os.getpid()
    previous = sys.unraisablehook
    timers = []
    main_thread = threading.main_thread().ident

    def unraisable(args) -> None:
        exc = args.exc_value
        if isinstance(exc, KeyboardInterrupt) and os.getpid() == pid:  # not in a forked worker or slot
            signum = getattr(exc, "signum", signal.SIGINT)
            while True:
                # Hazard: on a loaded machine the timer can fire before start() returns (it waits for
                # the thread), and the handler then raises here, in the hook, where Python drops it
                # again without calling the hook: caught here, and sent once more.
                try:
                    again = (main_thread, signum)
                    timers.append(threading.Timer(REDELIVER_AFTER, signal.pthread_kill, again))
                    timers[-1].start()
                    return
                except KeyboardInterrupt:
                    continue
        previous(args)

    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous
        for t in timers:  # the command is over: one not yet due is moot; one sent is raised here
            t.cancel()
        for t in timers:
            t.join()
