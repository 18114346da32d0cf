"""One exception tree for the harness, translated to exit codes at one boundary (``harness.cli.main``).

* :class:`UsageError` -- the user asked for something that does not exist or is malformed
  (unknown fault, bad schedule file). Exit 2, one line, no traceback.
* :class:`HarnessError` -- the harness itself could not do its job (PostgreSQL would not start,
  the DSN is unreachable, no Docker engine). Exit 3, one line, no traceback.

A property violation is not an exception: it is data in the report (exit 1).
"""

from __future__ import annotations

EXIT_HELD = 0
EXIT_VIOLATED = 1
EXIT_USAGE = 2
EXIT_HARNESS = 3


class ChaosError(Exception):
    """Base of every error the harness raises on purpose."""

    exit_code = EXIT_HARNESS


class UsageError(ChaosError):
    """Bad input from the user; the message names the culprit and, where there is one, the fix."""

    exit_code = EXIT_USAGE


class HarnessError(ChaosError):
    """The harness could not run (database, binaries, engine); nothing about the design under test."""

    exit_code = EXIT_HARNESS
