"""Progress on stderr: a rich progress bar when stderr is a terminal, plain lines when it is not.

:class:`Progress` is what the command line passes as ``progress``: call it with a line of text.
Code that knows how far it is calls :func:`step` instead, which moves the bar (and prints the
same plain line a pipe or a CI log gets). Any other ``progress`` callable (a test's lambda) still
works: :func:`step` gives it the text only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bar


class Progress:
    """``progress(text)``: a plain line on *stream* (or, with a bar, a line printed above it);
    ``progress(text, done=i, total=n)``: move the bar to *i* of *n* (*n* None: a count without an end).
    Use as a context manager so the bar is closed. *bar* None: a bar iff *stream* is a terminal."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False, bar: bool | None = None):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        use_bar = (bar if bar is not None else _isatty(self.stream)) and not quiet
        self._bar: Bar | None = None
        self._task: TaskID | None = None
        self._total: int | None = None
        if use_bar:
            # Hazard: no auto-refresh. A refresh thread could hold the stream's lock at the moment
            # the supervisor forks a worker, and the child would deadlock on its first write to
            # stderr; every update below refreshes by hand instead.
            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=Console(file=self.stream), auto_refresh=False,
                            transient=False, redirect_stdout=False, redirect_stderr=False)
            # stdout is not redirected: the results must go to stdout (a file, a pipe) even while
            # the bar is on the terminal; :func:`finish` closes the bar before they are printed

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __call__(self, text: str, *, done: int | None = None, total: int | None = None) -> None:
        if self.quiet:
            return
        if self._bar is None:
            print(f"  {text}", file=self.stream, flush=True)
            return
        if done is None:
            self._bar.console.print(f"  {text}", highlight=False, markup=False)
        elif self._task is None or total != self._total:
            # a new total (shrinking after the examples: no known end) is a new bar; rich's update()
            # cannot set a total back to None
            if self._task is not None:
                self._bar.update(self._task, visible=False)
            self._task = self._bar.add_task(text, total=total, completed=done)
            self._total = total
        else:
            self._bar.update(self._task, description=text, completed=done)
        self._bar.refresh()


def step(progress: Callable[..., None], text: str, *, done: int, total: int | None) -> None:
    """Report *done* of *total* to a :class:`Progress`, or just the text to any other callable."""
    if isinstance(progress, Progress):
        progress(text, done=done, total=total)
    else:
        progress(text)


def finish(progress: Callable[..., None]) -> None:
    """Close a :class:`Progress`'s bar (before results go to stdout); nothing for other callables."""
    if isinstance(progress, Progress):
        progress.close()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
