"""An endpoint that follows the primary, as a virtual IP does, for clients that take one host.

Contract. :class:`Endpoint` is one loopback port (a one-slot :class:`~harness.net.proxy.Proxies`
process) that forwards every new connection to the current primary. :meth:`Endpoint.move` is the
promotion: from then on new connections go to the new primary, and every open one is cut with RST both
ways, as a moved address does (the server that answers now knows none of those connections): the
client sees its connection break and must connect again. Between a primary's stop and the move, a new
connection is accepted and then reset (RST: ECONNRESET, where an address with no server behind it
would refuse it). ``move(port, keep_open=True)`` is the demote-in-place's flip: new connections go to
the new primary, open ones stay on the old (now read-only) node until their client closes them.

The harness's own connections never use it (they take the multi-host DSN); the replicated back end
(:mod:`harness.postgres.replica`) starts one and moves it at each promotion. The process ends when its
stdin closes (the harness's death, even by SIGKILL); it is also registered with the janitor.
"""

from __future__ import annotations

from psycopg import conninfo

from ...core.errors import HarnessError
from ...core.procs import process_start_time
from .proxy import Proxies

HOST = "127.0.0.1"


class Endpoint:
    def __init__(self, port: int, janitor=None):
        try:
            self._proxy = Proxies(HOST, port, 1)
        except RuntimeError as exc:
            raise HarnessError(f"the endpoint that follows the primary: {exc}") from None
        self.port = self._proxy.ports[1]
        self.target = port
        self.janitor = janitor
        self._key = None
        if janitor is not None:
            pid = self._proxy.proc.pid
            self._key = janitor.register("kill", pid=pid, start=process_start_time(pid))

    def move(self, port: int, *, keep_open: bool = False) -> None:
        """The primary is now on *port*: new connections go there; every open one is cut, unless
        *keep_open* (a demote-in-place: each stays on the old node it reached, as a managed
        database's DNS flip leaves a client's sockets)."""
        self.target = port
        self._proxy.retarget(HOST, port, keep=keep_open)

    def dsn(self, dsn: str) -> str:
        """*dsn* (its role, password, database) pointed at the endpoint: one host, no
        ``target_session_attrs`` (whatever answers there is the primary)."""
        params = conninfo.conninfo_to_dict(dsn)
        params.pop("target_session_attrs", None)
        params.update(host=HOST, port=str(self.port))
        return conninfo.make_conninfo("", **params)

    def close(self) -> None:
        self._proxy.close()
        if self.janitor is not None and self._key is not None:
            self.janitor.forget(self._key)
            self._key = None
