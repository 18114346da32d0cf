"""Named SQL statements kept in ``.sql`` files beside the Python that sends them.

File format (procrastinate's, stricter)::

    -- name: claim_job
    -- Claim the oldest queued job and lock it for this transaction.
    select ... where id = %(id)s;

:func:`load` resolves the names a module asks for *at import*: a missing or misspelt name
raises :class:`LookupError` when the module is imported, not in the middle of a run.
"""

from __future__ import annotations

import re
from pathlib import Path

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
_PARAM = re.compile(r"%\(([A-Za-z_][A-Za-z0-9_]*)\)s")


def params(statement: str) -> set[str]:
    """The ``%(name)s`` placeholders of *statement* (``%%`` is a literal percent sign)."""
    return set(_PARAM.findall(statement.replace("%%", "")))


def parse(text: str, *, source: str = "<sql>") -> dict[str, str]:
    """Return ``{name: statement}`` for every ``-- name:`` entry of *text*.

    Comment lines directly under the name are the description and are dropped; a duplicate
    name or an empty statement raises :class:`ValueError` naming *source*.
    """
    queries: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []

    def flush() -> None:
        if name is None:
            return
        body = "\n".join(lines).strip()
        if not body:
            raise ValueError(f"{source}: query {name!r} has no statement")
        queries[name] = body

    for raw in text.splitlines():
        m = _NAME.match(raw.strip())
        if m:
            flush()
            name = m.group(1)
            if name in queries:
                raise ValueError(f"{source}: query {name!r} is defined twice")
            lines = []
        elif name is not None:
            if not lines and raw.strip().startswith("--"):
                continue  # the description under the name
            lines.append(raw)
    flush()
    return queries


# Every statement loaded, by its text: "<file stem>.<name>" (lease.claim). Statement strike points
# (workers/body/statements.py) are named by it; a statement not here is named by a digest of its text.
NAMES: dict[str, str] = {}


def normalized(text: str) -> str:
    """*text* with its whitespace runs collapsed: the key of :data:`NAMES` and of a digest."""
    return " ".join(text.split())


class Queries:
    """The statements of one ``.sql`` file, as attributes; unknown attributes raise at access."""

    def __init__(self, path: Path, queries: dict[str, str]):
        self._path = path
        self._queries = queries
        for k, v in queries.items():
            setattr(self, k, v)

    def __getattr__(self, name: str) -> str:  # only called for names that are not set
        raise LookupError(f"{self._path.name} has no query named {name!r}; it has {sorted(self._queries)}")

    def replacing(self, **names: str) -> Queries:
        """A copy in which each statement ``name=other`` is this file's *other* (a library version's
        variant of a statement, chosen once: ``Q.replacing(final_states="final_states_0x")``)."""
        return Queries(self._path, {**self._queries, **{k: self._queries[v] for k, v in names.items()}})


def load(module_file: str, filename: str, *required: str) -> Queries:
    """Load *filename* from the directory of *module_file* (pass ``__file__``).

    Every name in *required* must be defined: otherwise :class:`LookupError` at import.
    """
    path = Path(module_file).resolve().parent / filename
    queries = parse(path.read_text(), source=str(path))
    missing = [r for r in required if r not in queries]
    if missing:
        raise LookupError(f"{path}: missing queries {missing}; defined: {sorted(queries)}")
    for name, text in queries.items():
        NAMES.setdefault(normalized(text), f"{path.stem}.{name}")
    return Queries(path, queries)
