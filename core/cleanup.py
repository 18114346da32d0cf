"""Cleanup that never clobbers the first error (psycopg's ``Connection.__exit__`` habit).

:class:`Cleanup` is an exit stack whose steps all run, last pushed first. When the body raised, a
step that fails too is logged and the body's error propagates; when the body succeeded, the first
failing step's error is raised after every other step has run. (``contextlib.ExitStack`` would let
a failing callback replace the error that mattered.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType
from typing import Literal

log = logging.getLogger("pgjc.cleanup")


class Cleanup:
    def __init__(self, logger: logging.Logger = log):
        self.log = logger
        self._steps: list[tuple[str, Callable[[], object]]] = []

    def push(self, what: str, fn: Callable[[], object]) -> None:
        """Run ``fn()`` at exit; *what* names it in the log line when it fails."""
        self._steps.append((what, fn))

    def __enter__(self) -> Cleanup:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        first: BaseException | None = None
        while self._steps:
            what, fn = self._steps.pop()
            try:
                fn()
            except BaseException as err:  # noqa: BLE001 -- every step runs, whatever the others did
                if exc is None and first is None:
                    first = err
                else:
                    self.log.error("cleanup (%s) failed after an earlier error: %s: %s", what,
                                   type(err).__name__, err)
        if first is not None:
            raise first
        return False
