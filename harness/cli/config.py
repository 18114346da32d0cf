"""Settings in a project's ``pyproject.toml``, table ``[tool.pg-job-chaos]``, as defaults of the command line.

The file is the first ``pyproject.toml`` that has the table, walking up from the current directory
(as ruff finds its own table), or the one ``--config FILE`` names; ``--no-config`` reads none. A key
is a flag's name, with dashes or underscores (``fail-on`` or ``fail_on``), and takes the flag's
value, typed: ``examples = 20``, ``time-scale = 0.5``, ``strict = true``, ``faults = "crash,overrun"``
or ``faults = ["crash", "overrun"]`` (so ``fail-on``, ``allow``, ``designs``), ``design-option =
{poll = "0.02"}`` or ``["poll=0.02"]``. A relative path (``out``, ``json``, ``junit``, ``html``,
``pg-bin``, ``example-db``, a design's ``file.py``) is the file's directory's, as in ruff and pytest.

Precedence: a flag on the command line, then the file, then the flag's own default. A
``--design-option`` on the command line is added to the file's (the same key: the command line's).
A key that a subcommand has no flag for is left to the others (``faults`` is nothing to ``replay``);
``replay`` also leaves the keys its schedule answers itself (:data:`SCHEDULE_KEYS`): it re-runs the
schedule as it was saved unless the command line says otherwise.

Hazard: the values become the subparser's argparse defaults, and argparse runs a *string* default
through the flag's ``type``; so every value is converted here first, and a bad one is reported with
the key and the file, never as an argparse message about a flag the user did not type.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from pathlib import Path
from typing import Any

from ...core.errors import UsageError

TABLE = "pg-job-chaos"
COMMANDS = ("search", "replay", "compare")  # the subcommands the file's settings are for
# flags that are actions, not settings
NOT_SETTINGS = ("help", "version", "list_faults", "config", "no_config")
LISTS = ("faults", "fail_on", "allow", "designs")  # comma-separated on the command line; a TOML list here too
PATHS = ("out", "json", "junit", "html", "pg_bin", "example_db")
SCHEDULE_KEYS = ("design", "design_option", "time_scale", "tenant_mode", "pg_version", "pooler", "replica")
# How the usage errors that name no flag name these settings (the catalogue's, the tenant modes', a design's,
# the server spec's fields: harness.postgres.ServerSpec)
WORDS = {"faults": "unknown fault", "tenant_mode": "tenant mode", "designs": "--design ",
         "postgres": "(postgres)", "pg_bin": "(pg_bin)", "pg_version": "(pg_version)", "pooler": "(pooler)",
         "replica": "(replica)"}


def find(start: Path) -> Path | None:
    """The first ``pyproject.toml`` with a ``[tool.pg-job-chaos]`` table in *start* or above it."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and read(candidate) is not None:
            return candidate
    return None


def read(path: Path) -> dict[str, Any] | None:
    """The ``[tool.pg-job-chaos]`` table of *path*, or None when it has none."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("tool", {}).get(TABLE) if isinstance(data.get("tool"), dict) else None
    if table is not None and not isinstance(table, dict):
        raise UsageError(f"{path}: tool.{TABLE} must be a table ([tool.{TABLE}])")
    return table


def locate(explicit: str | None, no_config: bool, start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The settings file and its table: ``--config FILE``, none with ``--no-config``, else :func:`find`."""
    if no_config:
        return None
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise UsageError(f"--config {explicit}: no such file")
        table = read(path)
        if table is None:
            raise UsageError(f"--config {explicit}: the file has no [tool.{TABLE}] table")
        return path.resolve(), table
    found = find(start.resolve())
    table = read(found) if found is not None else None  # None too if the file lost it since find() read it
    return (found, table) if found is not None and table is not None else None


def settings(parsers: dict[str, argparse.ArgumentParser]) -> dict[str, dict[str, argparse.Action]]:
    """``{key: {subcommand: its action}}``: every flag of *parsers* that is a setting, by its name
    with underscores (``fail_on`` for ``--fail-on``)."""
    out: dict[str, dict[str, argparse.Action]] = {}
    for command, p in parsers.items():
        for action in p._actions:  # argparse keeps no public list of a parser's arguments
            longs = [s for s in action.option_strings if s.startswith("--")]
            if not longs:
                continue
            key = longs[0][2:].replace("-", "_")
            if key not in NOT_SETTINGS:
                out.setdefault(key, {})[command] = action
    return out


def defaults(table: dict[str, Any], path: Path, parsers: dict[str, argparse.ArgumentParser],
             command: str) -> dict[str, Any]:
    """The argparse defaults (``{dest: value}``) that *table*, read from *path*, gives *command*;
    every key is checked, also those that are not *command* 's."""
    known = settings(parsers)
    seen: dict[str, str] = {}
    out: dict[str, Any] = {}
    for raw, value in table.items():
        key = raw.replace("-", "_")
        if key not in known:
            names = ", ".join(sorted(k.replace("_", "-") for k in known))
            raise UsageError(f"{path}: [tool.{TABLE}] unknown key {raw!r}; known keys: {names}")
        if key in seen:
            raise UsageError(f"{path}: [tool.{TABLE}] sets {key.replace('_', '-')} twice "
                             f"({seen[key]!r} and {raw!r})")
        seen[key] = raw
        action = next(iter(known[key].values()))
        converted = _convert(action, key, value, f"{path}: [tool.{TABLE}] {raw} = {value!r}", path.parent)
        if command in known[key] and not (command == "replay" and key in SCHEDULE_KEYS):
            out[known[key][command].dest] = converted
    return out


def _convert(action: argparse.Action, key: str, value: Any, where: str, base: Path) -> Any:
    """*value* as the flag *action* would have parsed it; :class:`UsageError` naming *where* if it cannot."""
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise UsageError(f"{where}: expected true or false")
        return value
    if isinstance(action, argparse._CountAction):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{where}: expected a whole number, 0 or more")
        return value
    if isinstance(action, argparse._AppendAction):
        return _pairs(value, where)
    if action.type is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{where}: expected an integer")
        return value
    if action.type is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UsageError(f"{where}: expected a number")
        return float(value)
    if key in LISTS and isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    if not isinstance(value, str):
        want = "a string or a list of strings" if key in LISTS else "a string"
        raise UsageError(f"{where}: expected {want}")
    if callable(action.type):  # argparse also takes a registered type's name: no flag here gives one
        try:
            return action.type(value)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise UsageError(f"{where}: {exc}") from None
    return _relative(key, value, base)


def _pairs(value: Any, where: str) -> list[str]:
    """``{key = "value"}``, ``["key=value", ...]`` or ``"key=value"`` as the ``KEY=VALUE`` strings."""
    if isinstance(value, dict):
        bad = [k for k, v in value.items() if isinstance(v, dict | list)]
        if bad:
            raise UsageError(f"{where}: {bad[0]} must be a string or a number")
        return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in value.items()]
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and "=" in v for v in items):
        raise UsageError(f'{where}: expected a table {{key = "value"}} or a list of "key=value" strings')
    return list(items)


def _relative(key: str, value: str, base: Path) -> str:
    """A path setting relative to the settings file's directory; other values as they are."""
    if key in PATHS and value != "-" and "://" not in value:
        return str(base / Path(value).expanduser())
    if key in ("design", "designs"):
        return ",".join(_design(d.strip(), base) for d in value.split(",")) if key == "designs" \
            else _design(value, base)
    return value


def _design(spec: str, base: Path) -> str:
    """``path/to/file.py:attr`` relative to *base*; a name or ``package.module:attr`` as it is."""
    module, colon, attr = spec.rpartition(":")
    if colon and (module.endswith(".py") or os.sep in module):
        return f"{base / Path(module).expanduser()}:{attr}"
    return spec


def blame(message: str, path: Path | None, keys: list[str]) -> str:
    """A suffix for a usage error *message* that names a setting the file gave: where it came from."""
    if path is None:
        return ""
    named = [k for k in keys if f"--{k.replace('_', '-')}" in message or WORDS.get(k, "\0") in message]
    return (f" ({', '.join(k.replace('_', '-') for k in named)} from [tool.{TABLE}] in {path})"
            if named else "")
