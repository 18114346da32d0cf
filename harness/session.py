"""What a command runs on: the provisioned server (with what its faults declare they need: durable
settings when one restarts it), the runner, the slots of ``--parallel``, and the search options from
the command line."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..core.errors import HarnessError, UsageError
from ..faults.catalogue import entries
from .net import partition
from .postgres import parse_spec, provision_for
from .postgres.local import DURABLE_SETTINGS
from .runner import Runner


def server_settings(args, fault_names) -> dict[str, str] | None:
    """The server settings the faults (names or catalogue entries) need, from what each declares:
    ``DURABLE_SETTINGS`` for one that ``needs_durable_settings`` (a restart), else None. A fault that
    ``needs_local_server`` (the harness stops and starts it) refuses any other server; one that
    ``needs_root_nftables`` (a partition) refuses a machine without them."""
    faults = entries(fault_names)
    if any(f.needs_root_nftables for f in faults) and (why := partition.available()):
        raise HarnessError(why)
    local = [f for f in faults if f.needs_local_server]
    if local and parse_spec(args.postgres)[0] != "local":
        raise UsageError(f"the {local[0].name} fault needs the local server (--postgres local): "
                         "it stops and starts it")
    return dict(DURABLE_SETTINGS) if any(f.needs_durable_settings for f in faults) else None


@contextlib.contextmanager
def runner_for(args, progress, fault_names=(), *, parallel: int = 1, designs=()) -> Iterator[Runner]:
    """A provisioned database and its runner; with *parallel* > 1 also that many slots (cloned
    first: a template database must have no session open), as ``runner.slots``. *designs*: the
    handles the command built, which the runner and every slot use (the slots inherit them by fork)."""
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(provision_for(args, settings=server_settings(args, fault_names),
                                                     progress=progress))
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


def slot_count(args, fault_names) -> int:
    """Slots for the run: one when a fault ``needs_one_slot`` (it reaches the whole server: a restart)
    or the workers go through a pooler (its configuration names one database)."""
    from .slots import MAX_SLOTS, default_slots

    n = default_slots() if args.parallel is None else args.parallel
    if not 1 <= n <= MAX_SLOTS:
        raise UsageError(f"--parallel must be between 1 and {MAX_SLOTS}")
    if any(f.needs_one_slot for f in entries(fault_names)) or getattr(args, "pooler", None):
        return 1
    return n


def search_options(args, runner=None) -> dict:
    """--budget, --shard, --example-db and --parallel as the search takes them."""
    from .engine.exampledb import open_database

    opts: dict = {"budget": args.budget}
    if runner is not None and runner.slots is not None:
        opts.update(run_many=runner.slots.run_many, parallel=runner.slots.n)
    if args.shard:
        opts["shard"] = args.shard
    if args.example_db:
        opts["database"] = open_database(args.example_db)
    return opts
