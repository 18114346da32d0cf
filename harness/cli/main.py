"""``pg-job-chaos``: one command line, one error boundary, exit codes stated once.

One program, one name in every message: the console script ``pg-job-chaos``, ``python -m pg_job_chaos``
and a checkout's ``python run.py`` are the same parser (:mod:`.parser`, a function a subcommand);
``--version`` prints ``pg-job-chaos <version>``.

Subcommands: ``search`` (the default), ``replay FILE``, ``compare``, ``experiment NAME``, ``bench``,
``new-design NAME`` (:mod:`.scaffold`: a hosted design file for the user's own worker, to fill in),
``check-design DESIGN`` (:mod:`.check`: positive controls, whether the harness can observe a design).
Without a subcommand, ``python run.py --design lease --faults crash,overrun`` is ``search``; the
flags ``--replay FILE`` and ``--compare`` name their subcommands.

Exit codes (:mod:`core.errors`): 0 every property held, 1 a property violated (with ``--strict``:
or could not decide), 2 usage error, 3 the harness itself failed. A user's mistake is one line on
stderr, never a traceback.

Settings: ``[tool.pg-job-chaos]`` in the project's ``pyproject.toml`` gives search, replay and compare
their defaults, below the flags given (:mod:`.config`, :func:`parse`).

The server: ``--postgres``, ``--pg-bin``, ``--pg-version`` and ``--pooler`` become one
:class:`~harness.postgres.ServerSpec`, ``args.server``, made once by :func:`parse` (:func:`server_spec`);
a command adds what its faults need (``harness.session.runner_for``) and provisions from it. Its
messages name its fields (``pg_bin``), each the flag of the same name.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback
from pathlib import Path

from ...core import logs
from ...core.errors import EXIT_HARNESS, EXIT_USAGE, ChaosError, UsageError
from ..postgres import ServerSpec
from ..progress import Progress
from . import config, interrupts
from .parser import SERVED, SUBCOMMANDS, parser


def normalise(argv: list[str]) -> list[str]:
    """The forms the README has always shown, as subcommands: no subcommand is ``search``;
    ``--replay FILE`` is ``replay FILE``; ``--compare`` is ``compare``."""
    if argv and (argv[0] in SUBCOMMANDS or argv[0] in ("-h", "--help", "--version")):
        return argv
    out = []
    command = "search"
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--compare":
            command = "compare"
        elif a == "--replay" and i + 1 < len(argv):
            command = "replay"
            out.append(argv[i + 1])
            i += 1
        elif a.startswith("--replay="):
            command = "replay"
            out.append(a.partition("=")[2])
        else:
            out.append(a)
        i += 1
    return [command, *out]


def parse(argv: list[str]) -> argparse.Namespace:
    """*argv* (normalised) parsed, with the settings file's values as the defaults of its subcommand:
    the flags given win. ``args.config_file`` is the file read (or None) and ``args.config_keys`` the
    settings it gave that the command line left as they were; ``args.server`` the
    :func:`server_spec` (None for a subcommand that runs on no server)."""
    p = parser()
    args = p.parse_args(argv)
    args.config_file = None
    args.config_keys = []
    found = config.locate(args.config, args.no_config, Path.cwd()) \
        if args.subcommand in config.COMMANDS else None
    if found is not None:
        path, table = found
        values = config.defaults(table, path, p.commands, args.subcommand)
        p.commands[args.subcommand].set_defaults(**values)
        args = p.parse_args(argv)
        args.config_file = path
        args.config_keys = sorted(dest for dest, value in values.items() if getattr(args, dest) == value)
    try:
        args.server = server_spec(args) if args.subcommand in SERVED else None
    except UsageError as exc:  # main's boundary cannot blame the file: it has no args yet
        raise UsageError(f"{exc}{config.blame(str(exc), args.config_file, args.config_keys)}") from None
    return args


def server_spec(args: argparse.Namespace) -> ServerSpec:
    """The server the command line names: ``--postgres``, ``--pg-bin``, ``--pg-version`` and ``--pooler``
    as one :class:`~harness.postgres.ServerSpec`; a :class:`UsageError` (naming the field) for a bad one."""
    return ServerSpec(postgres=args.postgres, pg_bin=args.pg_bin, pg_version=args.pg_version,
                      pooler=args.pooler, replica=getattr(args, "replica", None))


def main(argv: list[str] | None = None) -> int:
    """The one boundary where errors become exit codes."""
    argv = sys.argv[1:] if argv is None else list(argv)
    signal.signal(signal.SIGTERM, interrupts.terminated)
    args = None
    try:
        try:
            args = parse(normalise(argv))
        except SystemExit as exc:  # --help or --version (0) or a usage error (2), already printed
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        _logging(args.verbose)
        if args.verbose and args.config_file is not None:
            print(f"pg-job-chaos: settings from {args.config_file} [tool.{config.TABLE}]: "
                  f"{', '.join(k.replace('_', '-') for k in args.config_keys) or 'none used'}",
                  file=sys.stderr)
        # -v sends logs to stderr too: plain progress lines then, a bar would tangle with them
        with Progress(sys.stderr, quiet=args.quiet, bar=False if args.verbose else None) as progress, \
                interrupts.not_lost():
            return args.command(args, progress)
    except ChaosError as exc:
        origin = config.blame(str(exc), args.config_file, args.config_keys) \
            if isinstance(exc, UsageError) and args is not None else ""
        print(f"pg-job-chaos: {exc}{origin}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `pg-job-chaos ... | head`: the reader left; no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt as exc:
        print("pg-job-chaos: interrupted; everything it started has been removed", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    except Exception:  # a bug of ours, not the user's: say so, with the traceback for the report
        traceback.print_exc()
        print("pg-job-chaos: the harness itself failed (above); please report it", file=sys.stderr)
        return EXIT_HARNESS


def _logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logs.setup(level)
    logging.getLogger("psycopg.pool").setLevel(max(level, logging.ERROR))
