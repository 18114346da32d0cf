"""A run's network: the per-worker fault proxies and the partitions, for the network faults.

Started only when a schedule has a network fault (a catalogue entry with a ``network`` action:
``latency``, ``partition``, ``reset``, ``lose-commit-reply``): each worker slot then connects through its
own proxy port (:mod:`harness.net.proxy`), and a partition drops that port's packets on the loopback
(:mod:`harness.net.partition`). :meth:`Network.apply` takes the actions of
:data:`faults.api.NETWORK_ACTIONS`; any other is a :class:`HarnessError`. Everything is undone at the
end of the run, and by the janitor if the harness dies.
"""

from __future__ import annotations

from psycopg import conninfo

from ...core.errors import HarnessError
from ...faults.api import NETWORK_ACTIONS
from . import partition
from .proxy import Proxies


def check_action(action: str) -> None:
    """A :class:`HarnessError` unless *action* is one of :data:`~faults.api.NETWORK_ACTIONS`."""
    if action not in NETWORK_ACTIONS:
        raise HarnessError(f"unknown network action {action!r}; known: {', '.join(NETWORK_ACTIONS)}")


class Network:
    def __init__(self, worker_dsn: str, slots: int, janitor=None):
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

    def apply(self, slot: int, action: str, seconds: float = 0.0, backend: int | None = None) -> None:
        """One of :data:`~faults.api.NETWORK_ACTIONS` on a slot (*seconds*: the latency's delay;
        *backend*: the connection a lose-commit-reply targets)."""
        check_action(action)
        self._actions()[action](slot, seconds, backend)

    def _actions(self) -> dict:
        """Each of :data:`~faults.api.NETWORK_ACTIONS` as ``fn(slot, seconds, backend)``."""
        return {"latency": lambda slot, seconds, _: self.latency(slot, seconds),
                "reset": lambda slot, *_: self.reset(slot),
                "partition": lambda slot, *_: self.partition(slot), "heal": lambda slot, *_: self.heal(slot),
                "lose-commit-reply": lambda slot, _, backend: self.lose_commit_reply(slot, backend)}

    def latency(self, slot: int, seconds: float) -> None:
        self.proxies.latency(slot, seconds)

    def reset(self, slot: int) -> None:
        self.proxies.reset(slot)

    def lose_commit_reply(self, slot: int, backend: int | None = None) -> None:
        self.proxies.lose_commit_reply(slot, backend)

    def partition(self, slot: int) -> None:
        if slot in self._partitions:
            return
        port = self.proxies.ports[slot]
        key = self.janitor.register("nft", table=partition.table_name(port)) if self.janitor else None
        self._partitions[slot] = (partition.drop(port), key)

    def heal(self, slot: int) -> None:
        table, key = self._partitions.pop(slot, (None, None))
        if table is not None:
            partition.heal(table)
            if key is not None:
                self.janitor.forget(key)

    def close(self) -> None:
        for slot in list(self._partitions):
            self.heal(slot)
        self.proxies.close()
