"""What every experiment shares: its context, small statistics, the table renderer, plots."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import scales
from ..postgres import Database


def print_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Context:
    """How one experiment runs: where, at what scale, and where its progress and plots go."""

    database: Database
    quick: bool = False
    jobs: int | None = None  # --jobs: overrides the experiment's job count (horizon)
    plot_dir: Path | None = None
    progress: Callable[[str], None] = print_to_stderr
    time_scale: float | None = None  # None: harness.scales.experiment(quick)

    @property
    def direct_worker_dsn(self) -> str:
        """The worker role straight to the server, even with ``--pooler``: for the experiments that
        measure PostgreSQL itself (vacuum, horizon, rls-queue), whose sessions must stay put."""
        return self.database.direct_worker_dsn or self.database.worker_dsn

    @property
    def scale(self) -> float:
        return self.time_scale if self.time_scale is not None else scales.experiment(self.quick)

    def pick(self, full, quick):
        return quick if self.quick else full


def median_ms(seconds: list[float]) -> float | None:
    return round(statistics.median(seconds) * 1000, 3) if seconds else None


def fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def table(rows: list[dict], *, article_key: str = "article") -> str:
    """A plain-text table of *rows*; the ``article`` column always comes last."""
    if not rows:
        return "(no rows)"
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols and k != article_key]
    cols.append(article_key)
    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True)).rstrip()  # noqa: E731
    out = [line(cols), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out)


def plot(path: Path, draw: Callable) -> str | None:
    """Write one PNG with matplotlib (Agg); ``draw(ax)`` fills it. Returns the file name written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        draw(ax)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return str(path)
