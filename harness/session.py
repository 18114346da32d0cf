"""What a command runs on: the provisioned server (a :class:`~harness.postgres.ServerSpec` with what
its faults declare they need: durable settings when one restarts it), the runner, the slots of
``--parallel``, and the search options from the command line; :class:`Servers`, one per spec, for
runs whose faults are known only as each starts (the pytest plugin's)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..core.errors import HarnessError, UsageError
from ..faults.catalogue import entries
from .net import partition
from .postgres import Database, ServerSpec, parse_spec, provision
from .postgres.local import DURABLE_SETTINGS
from .runner import Runner


def server_settings(spec: ServerSpec, fault_names) -> dict[str, str] | None:
    """The server settings the faults (names or catalogue entries) need of *spec*'s server, from what
    each declares: ``DURABLE_SETTINGS`` for one that ``needs_durable_settings`` (a restart), else None.
    A fault that ``needs_local_server`` (the harness stops and starts it) refuses any other server; one
    that ``needs_root_nftables`` (a partition) refuses a machine without them."""
    faults = entries(fault_names)
    if any(f.needs_root_nftables for f in faults) and (why := partition.available()):
        raise HarnessError(why)
    _check_replica(spec.replica, faults)
    local = [f for f in faults if f.needs_local_server]
    if local and parse_spec(spec.postgres)[0] != "local":
        raise UsageError(f"the {local[0].name} fault needs the local server (postgres local): "
                         "it stops and starts it")
    return dict(DURABLE_SETTINGS) if any(f.needs_durable_settings for f in faults) else None


def _check_replica(replica: str | None, faults) -> None:
    """A fault that ``needs_replica`` (failover) refuses a run without the replicated back end; one that
    stops and starts the server itself (restart) refuses a run with it (its stop would fail over)."""
    needing = [f for f in faults if f.needs_replica]
    if needing and replica is None:
        raise UsageError(f"the {needing[0].name} fault needs the replicated back end (--replica async|sync): "
                         "it promotes the standby")
    own = [f for f in faults if f.needs_local_server or f.needs_durable_settings]
    if own and replica is not None:
        raise UsageError(f"the {own[0].name} fault does not combine with a replicated back end (--replica): "
                         "it stops and starts one server; the failover fault is its replicated kind")


def for_faults(spec: ServerSpec, fault_names) -> ServerSpec:
    """*spec* with what *fault_names* need of the server (:func:`server_settings`): the spec a run of
    those faults is provisioned from, by the command line and the pytest plugin alike."""
    return spec.with_settings(server_settings(spec, fault_names))


def check_server(database: Database, fault_names) -> None:
    """A :class:`UsageError` when *database*'s server lacks what *fault_names* declare they need -- the
    local server the harness stops and starts, the settings of :func:`server_settings` -- as a server
    started before the faults were known may: a run there would judge the harness, not the design."""
    faults = entries(fault_names)
    pair = database.replica  # the replicated back end's, when it has one
    _check_replica(pair.mode if pair is not None else None, faults)
    local = [f for f in faults if f.needs_local_server]
    if local and database.control is None:
        raise UsageError(f"the {local[0].name} fault needs the local server: it stops and starts it; "
                         f"this session's is {database.server}")
    needed = server_settings(database.spec or ServerSpec(), faults) or {}
    unmet = [f"{k}={v} (it runs {database.settings.get(k, 'unknown')})" for k, v in needed.items()
             if database.settings.get(k) != v]
    if unmet:
        names = ", ".join(f.name for f in faults if f.needs_durable_settings)
        raise UsageError(f"the {names} fault needs the server on {', '.join(unmet)}; this session's was "
                         f"started without (on {database.server}): provision it for those faults "
                         "(harness.session.for_faults), as the pytest plugin does")


@contextlib.contextmanager
def runner_for(spec: ServerSpec, progress, fault_names=(), *, parallel: int = 1,
               designs=()) -> Iterator[Runner]:
    """A database provisioned from *spec* with what *fault_names* need of it (:func:`for_faults`) and
    its runner; with *parallel* > 1 also that many slots (cloned
    first: a template database must have no session open), as ``runner.slots``. *designs*: the
    handles the command built, which the runner and every slot use (the slots inherit them by fork)."""
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(provision(for_faults(spec, fault_names), progress=progress))
        progress(f"PostgreSQL: {database.server}")
        if database.settings:
            progress("server settings: " + ", ".join(f"{k}={v}" for k, v in database.settings.items()))
        slots = None
        if parallel > 1:
            from .slots import Slots

            slots = stack.enter_context(Slots(database, parallel, designs))
            progress(f"{parallel} slots: databases cloned, one process each")
        runner = stack.enter_context(Runner(database, designs))
        runner.slots = slots
        yield runner


def slot_count(spec: ServerSpec, fault_names, parallel: int | None) -> int:
    """Slots for the run (*parallel*, ``--parallel``; None: the default): one when a fault
    ``needs_one_slot`` (it reaches the whole server: a restart) or *spec*'s workers go through a
    pooler (its configuration names one database)."""
    from .slots import MAX_SLOTS, default_slots

    n = default_slots() if parallel is None else parallel
    if not 1 <= n <= MAX_SLOTS:
        raise UsageError(f"--parallel must be between 1 and {MAX_SLOTS}")
    if any(f.needs_one_slot for f in entries(fault_names)) or spec.pooler:
        return 1
    return n


class Servers:
    """Servers for runs whose faults are known only as each starts (the pytest plugin's session): one
    per spec -- *spec* with what the run's faults need (:func:`for_faults`) -- each provisioned when
    first asked for, with its :class:`Runner`; all removed when the ``with`` block ends."""

    def __init__(self, spec: ServerSpec):
        self.spec = spec
        self._stack = contextlib.ExitStack()
        self._databases: dict[ServerSpec, Database] = {}
        self._runners: dict[ServerSpec, Runner] = {}

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc) -> bool | None:
        return self._stack.__exit__(*exc)

    def database(self, fault_names=()) -> Database:
        """The database for runs of *fault_names* (none: :attr:`spec`'s own)."""
        spec = for_faults(self.spec, fault_names)
        if spec not in self._databases:
            self._databases[spec] = self._stack.enter_context(provision(spec))
        return self._databases[spec]

    def runner(self, fault_names=()) -> Runner:
        """The runner on :meth:`database` (*fault_names*)."""
        spec = for_faults(self.spec, fault_names)
        if spec not in self._runners:
            database = self.database(fault_names)  # first: the runner closes before its server goes
            self._runners[spec] = self._stack.enter_context(Runner(database))
        return self._runners[spec]


def search_options(args, runner=None) -> dict:
    """--budget, --shard, --example-db, --parallel and --grace as the search takes them."""
    from .engine.exampledb import open_database

    opts: dict = {"budget": args.budget}
    if getattr(args, "grace", None) is not None:  # --grace: every drawn schedule's (the deploy fault's)
        opts["grace"] = args.grace
    if runner is not None and runner.slots is not None:
        opts.update(run_many=runner.slots.run_many, parallel=runner.slots.n)
    if args.shard:
        opts["shard"] = args.shard
    if args.example_db:
        opts["database"] = open_database(args.example_db)
    return opts
