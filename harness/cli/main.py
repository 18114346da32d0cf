"""``pg-job-chaos``: one command line, one error boundary, exit codes stated once.

One program, one name in every message: the console script ``pg-job-chaos``, ``python -m pg_job_chaos``
and a checkout's ``python run.py`` are the same parser (:data:`PROG`); ``--version`` prints
``pg-job-chaos <version>``.

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

from ... import __version__
from ...core import logs
from ...core.errors import EXIT_HARNESS, EXIT_USAGE, ChaosError, UsageError
from ...workers import DESIGNS, LIBRARIES, MODES
from .. import experiments, scales
from ..bench import main as bench
from ..postgres import ServerSpec
from ..progress import Progress
from ..report.result import PROGRAM
from . import check, commands, config, interrupts, scaffold

PROG = PROGRAM  # the console script; run.py and python -m pg_job_chaos are the same program
SUBCOMMANDS = ("search", "replay", "compare", "experiment", "bench", scaffold.COMMAND, check.COMMAND)
SERVED = tuple(c for c in SUBCOMMANDS if c != scaffold.COMMAND)  # the subcommands that run on a server
DEFAULT_EXAMPLES = 10


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # --design must never be read as --designs
        super().__init__(*args, **kwargs)

    def error(self, message):  # argparse's usage errors: one line, exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


class Program(_Parser):
    """The program's parser; ``commands``: the subcommands' parsers the settings file is for."""

    commands: dict[str, argparse.ArgumentParser]


def parser() -> Program:
    common = _Parser(add_help=False)
    common.add_argument("--postgres", default="local", metavar="SPEC",
                        help="local (default) | a DSN | docker[:IMAGE]")
    common.add_argument("--pg-bin", metavar="DIR", help="directory with initdb and postgres (local back end)")
    common.add_argument("--pg-version", type=int, metavar="N",
                        help="the server's major version: 17 (the wheel's 17.10, default) or 15 (Debian's "
                             "postgresql-15); a replay defaults to its schedule's")
    common.add_argument("--pooler", metavar="SPEC",
                        help="pgbouncer[:transaction|session[:N]]: PgBouncer (N server connections, "
                             "default 5) between the workers and the server (default: none, direct; a "
                             "replay: its schedule's)")
    common.add_argument("--replica", choices=("async", "sync"),
                        help="a primary and a streaming standby (local server): what the failover fault "
                             "promotes (a replay: its schedule's)")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    common.add_argument("-v", "--verbose", action="count", default=0,
                        help="supervisor logs on stderr (-vv: debug)")
    _version(common)

    runs = _Parser(add_help=False)  # what search, replay and compare share
    runs.add_argument("--tenant-mode", help=f"{' | '.join(MODES)} (default local)")
    runs.add_argument("--time-scale", type=float, metavar="X",
                      help=f"multiply every duration (the article's lease is 1 s; default {scales.SEARCH:g}; "
                           "replay: the schedule's own)")
    runs.add_argument("--json", metavar="FILE", help="write the results as JSON (format in the README)")
    runs.add_argument("--junit", metavar="FILE", help="write one JUnit test case per property")
    runs.add_argument("--strict", action="store_true",
                      help="a property that could not decide (unknown) fails the run too (exit 1)")
    runs.add_argument("--html", metavar="FILE",
                      help="write one self-contained HTML page: tables and timelines")
    runs.add_argument("--fail-on", metavar="PROPS",
                      help="only these properties fail the run (names or groups: safety, liveness, "
                           "resources, all; comma-separated; default all); the search shrinks only their "
                           "violations")
    runs.add_argument("--allow", metavar="PROPS",
                      help="these properties' violations are reported but do not fail the run "
                           "(names or groups)")
    where = runs.add_mutually_exclusive_group()
    where.add_argument("--config", metavar="FILE",
                       help=f"read the settings of FILE's [tool.{config.TABLE}] (default: the first "
                            "pyproject.toml with that table, from the current directory up); flags given win")
    where.add_argument("--no-config", action="store_true", help="read no pyproject.toml settings")

    drawn = _Parser(add_help=False)  # what search and compare draw schedules with
    drawn.add_argument("--faults", default="",
                       help="comma-separated faults, e.g. crash,overrun (see --list-faults)")
    drawn.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES,
                       help=f"schedules to generate (default {DEFAULT_EXAMPLES})")
    drawn.add_argument("--seed", type=int, help="Hypothesis seed, for a reproducible search")
    drawn.add_argument("--workers", type=int, help="fix the number of workers (default: searched, 1-3)")
    drawn.add_argument("--workload", metavar="NAME[:N]",
                       help="a tenant workload every schedule declares: flood (one tenant's flood of at most "
                            "N jobs beside small tenants; judges starvation-bound, docs/fairness.md)")
    drawn.add_argument("--list-faults", action="store_true", help="list the fault catalogue and exit")
    drawn.add_argument("--budget", type=float, metavar="SECONDS",
                       help="stop starting new schedules after this long (shrinking and the report still "
                            "run)")
    drawn.add_argument("--shard", type=_shard, metavar="I/N",
                       help="run the I-th of N disjoint parts (1-based)")
    drawn.add_argument("--example-db", metavar="DIR|redis://HOST:PORT/DB",
                       help="Hypothesis's example database (default ~/.cache/pg-job-chaos); a Redis URL "
                            "shares it between shards")
    drawn.add_argument("--parallel", type=int, metavar="N",
                       help="schedules known in advance (small-scope pass, examples after the first failure, "
                            "compare's replays) run N at a time, each slot its own database (default: "
                            "2 x cores, at most 8); Hypothesis's own generation and shrinking stay one at a "
                            "time")
    drawn.add_argument("--out", default="chaos-out",
                       help="where counterexample schedules are saved (default ./chaos-out)")

    designed = _Parser(add_help=False)  # what search and check-design build their design with
    designed.add_argument("--design-option", action="append", default=[], metavar="KEY=VALUE",
                          help="passed to the design's class or factory as a keyword argument (repeatable)")

    p = Program(prog=PROG, description=(
        "Chaos harness for PostgreSQL job workers: searches for schedules of faults that break a design's "
        "guarantees. Without a subcommand, 'search'."))
    _version(p)
    sub = p.add_subparsers(dest="subcommand", metavar="{" + ",".join(SUBCOMMANDS) + "}", parser_class=_Parser)
    s = sub.add_parser("search", parents=[common, runs, drawn, designed],
                       help="search for a violating schedule (default)")
    s.add_argument("--design", help=f"{' | '.join(DESIGNS)} | {' | '.join(LIBRARIES)} | "
                                    "package.module:attr | path/to/file.py:attr (default lease)")
    s.set_defaults(command=commands.search)
    r = sub.add_parser("replay", parents=[common, runs], help="run one saved schedule and check it")
    r.add_argument("file", metavar="FILE")
    r.add_argument("--design", help="run it on another design than the one it names")
    r.add_argument("--design-option", action="append", default=[], metavar="KEY=VALUE",
                   help="replace the design options the schedule records (repeatable)")
    r.set_defaults(command=commands.replay)
    c = sub.add_parser("compare", parents=[common, runs, drawn], help="the same schedules on several designs")
    c.add_argument("--designs", help="comma-separated designs (default all built-in)")
    c.set_defaults(command=commands.compare)
    experiments.add_parser(sub, [common])
    bench.add_parser(sub, [common])
    _version(scaffold.add_parser(sub))
    check.add_parser(sub, [common, designed])
    p.commands = {"search": s, "replay": r, "compare": c}  # the subparsers the settings file is for
    return p


def _version(p: argparse.ArgumentParser) -> None:
    """``--version``, on the program and on every subcommand (``pg-job-chaos search --version`` too)."""
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}",
                   help="print the program's version and exit")


def _shard(text: str) -> tuple[int, int]:
    """``I/N`` (1-based) -> ``(I-1, N)``."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: expected I/N, e.g. 2/4") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: I must be between 1 and N")
    return i - 1, n


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
