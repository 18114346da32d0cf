"""The command line's grammar: the program's parser, a function a subcommand and one a group.

:func:`parser` builds :class:`Program`: ``search``, ``replay`` and ``compare`` here
(:func:`_search`, :func:`_replay`, :func:`_compare`), the other subcommands in their own modules
(``experiment``: :mod:`harness.experiments`, ``bench``: :mod:`harness.bench.main`,
``new-design``: :mod:`.scaffold`, ``check-design``: :mod:`.check`). The options several
subcommands take are parent parsers, each built by one function: :func:`_common` (the server,
progress and logs: every subcommand but ``new-design``), :func:`_runs` (a run's report and gate:
search, replay, compare), :func:`_drawn` (drawing schedules: search, compare) and
:func:`_designed` (design options: search, check-design).

Every parser is a :class:`_Parser`: a usage error is one line on stderr and exit 2, and no flag is
read as an abbreviation of another. Parsing only: what a subcommand does is its ``command``
default (:mod:`.commands` and the modules above); the settings file and the boundary are
:mod:`.main`'s.
"""

from __future__ import annotations

import argparse

from ... import __version__
from ...core.errors import EXIT_USAGE
from ...workers import DESIGNS, LIBRARIES, MODES
from .. import experiments, scales
from ..bench import main as bench
from ..bench import soak
from ..corpus import command as corpus
from ..report.result import PROGRAM
from . import check, commands, config, scaffold

PROG = PROGRAM  # the console script; run.py and python -m pg_job_chaos are the same program
SUBCOMMANDS = (
    "search",
    "replay",
    "compare",
    "experiment",
    "bench",
    "soak",
    "corpus",
    scaffold.COMMAND,
    check.COMMAND,
)
# the subcommands that run on a server
SERVED = tuple(c for c in SUBCOMMANDS if c != scaffold.COMMAND)
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
    """The program's parser, every subcommand on it; ``commands`` names search's, replay's and
    compare's."""
    common = _common()
    runs = _runs()
    drawn = _drawn()
    designed = _designed()
    p = Program(
        prog=PROG,
        description=(
            "Chaos harness for PostgreSQL job workers: searches for schedules of faults that "
            "break a design's guarantees. Without a subcommand, 'search'."
        ),
    )
    _version(p)
    sub = p.add_subparsers(
        dest="subcommand",
        metavar="{" + ",".join(SUBCOMMANDS) + "}",
        parser_class=_Parser,
    )
    s = _search(sub, [common, runs, drawn, designed])
    r = _replay(sub, [common, runs])
    c = _compare(sub, [common, runs, drawn])
    experiments.add_parser(sub, [common])
    bench.add_parser(sub, [common])
    soak.add_parser(sub, [common])
    corpus.add_parser(sub, [common])
    _version(scaffold.add_parser(sub))
    check.add_parser(sub, [common, designed])
    # the subparsers the settings file is for
    p.commands = {"search": s, "replay": r, "compare": c}
    return p


def _search(sub, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """``search``: draw schedules for one design and shrink what fails (the default subcommand)."""
    s = sub.add_parser("search", parents=parents, help="search for a violating schedule (default)")
    s.add_argument(
        "--design",
        help=f"{' | '.join(DESIGNS)} | {' | '.join(LIBRARIES)} | "
        "package.module:attr | path/to/file.py:attr (default lease)",
    )
    s.add_argument(
        "--stop-at-first",
        action="store_true",
        help="start no new schedule once a run fails (a known bug's hunt: with --fail-on PROP, "
        "its first violation); that run is still shrunk and replayed",
    )
    s.add_argument(
        "--no-small-scope",
        dest="small_scope",
        action="store_false",
        help="skip the small-scope pass (every fault at every point, the recovery statements first): "
        "only the generated examples run, e.g. to spend a budget on them after an earlier search "
        "covered the pass",
    )
    s.add_argument(
        "--replays",
        type=int,
        default=1,
        metavar="N",
        help="run the counterexample N more times at the end and say in how many it failed "
        "again (default 1)",
    )
    s.set_defaults(command=commands.search)
    return s


def _replay(sub, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """``replay FILE``: run one saved schedule, on its design or another."""
    r = sub.add_parser("replay", parents=parents, help="run one saved schedule and check it")
    r.add_argument("file", metavar="FILE")
    r.add_argument("--design", help="run it on another design than the one it names")
    r.add_argument(
        "--design-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="replace the design options the schedule records (repeatable)",
    )
    r.set_defaults(command=commands.replay)
    return r


def _compare(sub, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """``compare``: the same drawn schedules on several designs."""
    c = sub.add_parser("compare", parents=parents, help="the same schedules on several designs")
    c.add_argument("--designs", help="comma-separated designs (default all built-in)")
    c.set_defaults(command=commands.compare)
    return c


def _common() -> _Parser:
    """What every subcommand but ``new-design`` takes: the server, progress, logs,
    ``--version``."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--postgres",
        default="local",
        metavar="SPEC",
        help="local (default) | a DSN | docker[:IMAGE]",
    )
    common.add_argument(
        "--pg-bin",
        metavar="DIR",
        help="directory with initdb and postgres (local back end)",
    )
    common.add_argument(
        "--pg-version",
        type=int,
        metavar="N",
        help="the server's major version: 17 (the wheel's 17.10, default) or 15 (Debian's "
        "postgresql-15); a replay defaults to its schedule's",
    )
    common.add_argument(
        "--pooler",
        metavar="SPEC",
        help="pgbouncer[:transaction|session[:N]]: PgBouncer (N server connections, "
        "default 5) between the workers and the server (default: none, direct; a "
        "replay: its schedule's)",
    )
    common.add_argument(
        "--replica",
        choices=("async", "sync"),
        help="a primary and a streaming standby (local server): what the failover fault "
        "promotes (a replay: its schedule's)",
    )
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="supervisor logs on stderr (-vv: debug)",
    )
    _version(common)
    return common


def _runs() -> _Parser:
    """What search, replay and compare share: the tenant mode, time scale, report files, the gate
    and the settings file."""
    runs = _Parser(add_help=False)
    runs.add_argument("--tenant-mode", help=f"{' | '.join(MODES)} (default local)")
    runs.add_argument(
        "--time-scale",
        type=float,
        metavar="X",
        help="multiply every duration (the article's lease is 1 s; "
        f"default {scales.SEARCH:g}; replay: the schedule's own)",
    )
    runs.add_argument(
        "--grace",
        type=float,
        metavar="SECONDS",
        help="the deploy fault's grace between SIGTERM and SIGKILL, in article seconds (scaled by "
        "--time-scale; default 30, Kubernetes' terminationGracePeriodSeconds; replay: the schedule's)",
    )
    runs.add_argument(
        "--json",
        metavar="FILE",
        help="write the results as JSON (format in the README)",
    )
    runs.add_argument("--junit", metavar="FILE", help="write one JUnit test case per property")
    runs.add_argument(
        "--strict",
        action="store_true",
        help="a property that could not decide (unknown) fails the run too (exit 1)",
    )
    runs.add_argument(
        "--html",
        metavar="FILE",
        help="write one self-contained HTML page: tables and timelines",
    )
    runs.add_argument(
        "--fail-on",
        metavar="PROPS",
        help="only these properties fail the run (names or groups: safety, liveness, "
        "resources, all; comma-separated; default all); the search shrinks only their "
        "violations",
    )
    runs.add_argument(
        "--allow",
        metavar="PROPS",
        help="these properties' violations are reported but do not fail the run "
        "(names or groups)",
    )
    where = runs.add_mutually_exclusive_group()
    where.add_argument(
        "--config",
        metavar="FILE",
        help=f"read the settings of FILE's [tool.{config.TABLE}] (default: the first "
        "pyproject.toml with that table, from the current directory up); flags given win",
    )
    where.add_argument("--no-config", action="store_true", help="read no pyproject.toml settings")
    return runs


def _drawn() -> _Parser:
    """What search and compare draw schedules with: faults, examples, seed, workers, budget,
    shards, the example database, parallel slots and where counterexamples go."""
    drawn = _Parser(add_help=False)
    drawn.add_argument(
        "--faults",
        default="",
        help="comma-separated faults, e.g. crash,overrun (see --list-faults)",
    )
    drawn.add_argument(
        "--examples",
        type=int,
        default=DEFAULT_EXAMPLES,
        help=f"schedules to generate (default {DEFAULT_EXAMPLES})",
    )
    drawn.add_argument("--seed", type=int, help="Hypothesis seed, for a reproducible search")
    drawn.add_argument(
        "--workers",
        type=int,
        help="fix the number of workers (default: searched, 1-3)",
    )
    drawn.add_argument(
        "--workload",
        metavar="NAME[:N]",
        help="a tenant workload every schedule declares: flood (one tenant's flood of at most "
        "N jobs beside small tenants; judges the fairness group, docs/fairness.md)",
    )
    drawn.add_argument(
        "--list-faults",
        action="store_true",
        help="list the fault catalogue and exit",
    )
    drawn.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="stop starting new schedules after this long (shrinking and the report still "
        "run)",
    )
    drawn.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help="run the I-th of N disjoint parts (1-based)",
    )
    drawn.add_argument(
        "--example-db",
        metavar="DIR|redis://HOST:PORT/DB",
        help="Hypothesis's example database (default ~/.cache/pg-job-chaos); a Redis URL "
        "shares it between shards",
    )
    drawn.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="schedules known in advance (small-scope pass, examples after the first failure, "
        "compare's replays) run N at a time, each slot its own database (default: "
        "2 x cores, at most 8); Hypothesis's own generation and shrinking stay one at a "
        "time",
    )
    drawn.add_argument(
        "--out",
        default="chaos-out",
        help="where counterexample schedules are saved (default ./chaos-out)",
    )
    return drawn


def _designed() -> _Parser:
    """What search and check-design build their design with: ``--design-option``."""
    designed = _Parser(add_help=False)
    designed.add_argument(
        "--design-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to the design's class or factory as a keyword argument (repeatable)",
    )
    return designed


def _version(p: argparse.ArgumentParser) -> None:
    """``--version``, on the program and on every subcommand (``pg-job-chaos search --version``
    too)."""
    p.add_argument(
        "--version",
        action="version",
        version=f"{PROG} {__version__}",
        help="print the program's version and exit",
    )


def _shard(text: str) -> tuple[int, int]:
    """``I/N`` (1-based) -> ``(I-1, N)``."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: expected I/N, e.g. 2/4") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--shard {text!r}: I must be between 1 and N")
    return i - 1, n
