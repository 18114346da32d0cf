"""A run's network: the per-worker fault proxies and the partitions, for the network faults.

Started only when a schedule has a network fault (a catalogue entry with a ``network`` action, a
:class:`faults.api.NetworkAction`: ``latency``, ``partition``, ``reset``, ``lose-commit-reply``): each
worker slot then connects through its own proxy port (:mod:`harness.net.proxy`), and a partition drops
that port's packets on the loopback (:mod:`harness.net.partition`). Each action is a method of
:class:`Network` on a slot, as the supervisor's strikes call them (``SupervisorAPI.add_latency`` and
the rest). Everything is undone at the end of the run, and by the janitor if the harness dies.
"""

from __future__ import annotations

from psycopg import conninfo

from ...core.errors import HarnessError
from ...core.server import Janitor
from . import partition
from .proxy import Proxies


class Network:
    def __init__(self, worker_dsn: str, slots: int, janitor: Janitor | None = None):
        target = conninfo.conninfo_to_dict(worker_dsn)
        self.worker_dsn = worker_dsn
        self.janitor = janitor
        try:
            # a parsed DSN's values are text (conninfo_to_dict types them as it takes them: str | int | None)
            host = str(target.get("host", "127.0.0.1"))
            port = int(str(target.get("port", 5432)))
            self.proxies = Proxies(host, port, slots)
        except RuntimeError as exc:
            raise HarnessError(str(exc)) from None
        self._partitions: dict[int, tuple[str, str | None]] = {}  # slot -> (table, janitor key)

    @property
    def fds(self) -> tuple[int, ...]:
        return self.proxies.fds

    def dsn_for(self, slot: int) -> str:
        return conninfo.make_conninfo(self.worker_dsn, host="127.0.0.1", port=str(self.proxies.ports[slot]))

    def latency(self, slot: int, seconds: float) -> None:
        """Delay every chunk of the slot's traffic by *seconds*, either way (0: no more)."""
        self.proxies.latency(slot, seconds)

    def reset(self, slot: int) -> None:
        """Cut the slot's connections with a TCP RST."""
        self.proxies.reset(slot)

    def lose_commit_reply(self, slot: int, backend: int | None = None) -> None:
        """Withhold the reply to the next commit on *backend*'s connection (any of the slot's when None
        or not one of them) and cut that connection with RST."""
        self.proxies.lose_commit_reply(slot, backend)

    def partition(self, slot: int) -> None:
        """Drop the slot's packets (nftables) until :meth:`heal`."""
        if slot in self._partitions:
            return
        port = self.proxies.ports[slot]
        key = self.janitor.register("nft", table=partition.table_name(port)) if self.janitor else None
        self._partitions[slot] = (partition.drop(port), key)

    def heal(self, slot: int) -> None:
        """End the slot's partition (none: nothing to do)."""
        table, key = self._partitions.pop(slot, (None, None))
        if table is not None:
            partition.heal(table)
            if key is not None and self.janitor is not None:
                self.janitor.forget(key)

    def close(self) -> None:
        for slot in list(self._partitions):
            self.heal(slot)
        self.proxies.close()
