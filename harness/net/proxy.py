"""A fault proxy per worker: the network faults ``latency``, ``reset`` and ``lost-commit-reply`` act here.

Contract. :class:`Proxies` starts one process (``python -m pg_job_chaos.harness.net.proxy``, not a fork: a
forked worker must not inherit proxied sockets, or closing them would not close them) that listens on
one free 127.0.0.1 port per worker slot and forwards each accepted connection to the target
(PostgreSQL, or PgBouncer). Commands, one line each on its stdin:

* ``latency SLOT SECONDS`` -- every chunk forwarded for that slot, either way, waits SECONDS first
  (0 ends it);
* ``reset SLOT`` -- every open connection of that slot is cut with a TCP RST, both sides, at once
  (mid-transaction: the server rolls back, the client's next statement fails);
* ``lose-commit-reply SLOT [BACKEND]`` -- arms the slot: the next reply to a commit on a connection of
  that slot (on the connection of backend pid BACKEND, when one of the slot's open connections is that
  backend; else on any of them, new ones too) is withheld from its CommandComplete on, and that
  connection is cut with RST both ways. The server has committed; the client sees a lost connection.
  One strike, then it is disarmed; a targeted connection that closes first disarms it too. What a
  commit's reply is: :mod:`harness.net.pgwire` (which reads every server-to-client stream);
* ``target HOST PORT`` -- new connections, every slot's, go to HOST:PORT, and every open one is cut with
  RST, both sides (a virtual IP moved to another server: :mod:`harness.net.endpoint`);

and it answers ``ok`` after each. It exits when its stdin closes: the harness's death, even by
SIGKILL, ends it. A ``partition`` is not done here (a proxy that stops forwarding still has its
kernel acknowledge the bytes): see :mod:`harness.net.partition`.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import struct
import subprocess
import sys
from collections import defaultdict

from .pgwire import ServerStream

CHUNK = 65536
ANY = None  # a lose-commit-reply that strikes the slot's next commit, whichever connection has it


class _Server:
    def __init__(self, target: tuple[str, int], slots: int):
        self.target = target
        self.slots = slots
        self.latency: dict[int, float] = defaultdict(float)
        self.open: dict[int, set[asyncio.StreamWriter]] = defaultdict(set)
        self.ports: dict[int, int] = {}
        self.lose: dict[int, int | None] = {}  # armed slot -> backend pid it targets, or ANY
        self.streams: dict[int, set[ServerStream]] = defaultdict(set)

    async def start(self) -> None:
        for slot in range(1, self.slots + 1):
            srv = await asyncio.start_server(functools.partial(self._client, slot), "127.0.0.1", 0)
            self.ports[slot] = srv.sockets[0].getsockname()[1]

    async def _client(self, slot: int, reader, writer) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)
            return
        pair = {writer, up_w}
        stream = ServerStream()
        self.open[slot] |= pair
        self.streams[slot].add(stream)
        try:
            await asyncio.gather(self._pump(slot, reader, up_w),
                                 self._pump(slot, up_r, writer, stream, pair))
        finally:
            self.open[slot] -= pair
            self.streams[slot].discard(stream)
            if stream.pid is not None and self.lose.get(slot, ANY) == stream.pid:
                del self.lose[slot]  # its target is gone: nothing of it left to strike
            for w in pair:
                w.close()

    async def _pump(self, slot: int, reader, writer, stream: ServerStream | None = None, pair=()) -> None:
        """Forward one direction; *stream*: this is the server-to-client one, read for lose-commit-reply."""
        try:
            while data := await reader.read(CHUNK):
                if self.latency[slot] > 0:
                    await asyncio.sleep(self.latency[slot])
                if stream is not None:
                    data, strike = stream.feed(data, self._armed(slot, stream))
                    if strike:
                        self._strike(slot, writer, data, pair)
                        return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    def retarget(self, host: str, port: int, *, keep: bool = False) -> None:
        """New connections go to *host*:*port*; every open one is cut, unless *keep* (it stays on the
        server it reached)."""
        self.target = (host, port)
        for slot in list(self.open) if not keep else ():
            self.reset(slot)

    def reset(self, slot: int) -> None:
        for w in list(self.open[slot]):
            _abort(w)
        self.open[slot].clear()

    def arm(self, slot: int, backend: int | None) -> None:
        """``lose-commit-reply``: target *backend*'s connection if the slot has it open, else ANY."""
        known = backend is not None and any(s.pid == backend for s in self.streams[slot])
        self.lose[slot] = backend if known else ANY

    def _armed(self, slot: int, stream: ServerStream) -> bool:
        if slot not in self.lose:
            return False
        target = self.lose[slot]
        return target is ANY or target == stream.pid

    def _strike(self, slot: int, writer, before: bytes, pair) -> None:
        """The commit's reply is withheld: forward what came before it (best effort: the RST may
        overtake it), then cut this connection with RST both ways, and disarm."""
        self.lose.pop(slot, None)
        if before:
            writer.write(before)
        for w in pair:
            _abort(w)
        self.open[slot] -= set(pair)


def _abort(writer) -> None:
    """Close with RST, not FIN: SO_LINGER on, timeout 0, then close without flushing."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


async def _main(target: tuple[str, int], slots: int) -> None:
    server = _Server(target, slots)
    await server.start()
    print(" ".join(str(server.ports[s]) for s in range(1, slots + 1)), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        parts = line.decode().split()
        if parts[:1] == ["latency"]:
            server.latency[int(parts[1])] = float(parts[2])
        elif parts[:1] == ["reset"]:
            server.reset(int(parts[1]))
        elif parts[:1] == ["lose-commit-reply"]:
            server.arm(int(parts[1]), int(parts[2]) if len(parts) > 2 else None)
        elif parts[:1] == ["target"]:
            server.retarget(parts[1], int(parts[2]), keep=parts[3:] == ["keep"])
        print("ok", flush=True)
    # stdin closed: the harness is gone or done


class Proxies:
    """The harness side: start the proxy process, send it commands, stop it. One per run."""

    def __init__(self, target_host: str, target_port: int, slots: int):
        self.proc = subprocess.Popen([sys.executable, "-m", __spec__.name, target_host, str(target_port),
                                      str(slots)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     # asyncio's shutdown reports the connections it cancels at exit
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # stdin=PIPE, stdout=PIPE
        self._stdin = self.proc.stdin
        self._stdout = self.proc.stdout
        first = self._stdout.readline().split()
        if len(first) != slots:
            self.close()
            raise RuntimeError("the fault proxy did not start")
        self.ports = {slot: int(p) for slot, p in enumerate(first, 1)}

    @property
    def fds(self) -> tuple[int, ...]:
        """Our ends of its pipes: a forked worker must close them."""
        return (self._stdin.fileno(), self._stdout.fileno())

    def _send(self, line: str) -> None:
        self._stdin.write(line + "\n")
        self._stdin.flush()
        self._stdout.readline()  # "ok": the change is in effect before we go on

    def latency(self, slot: int, seconds: float) -> None:
        self._send(f"latency {slot} {seconds}")

    def reset(self, slot: int) -> None:
        self._send(f"reset {slot}")

    def lose_commit_reply(self, slot: int, backend: int | None = None) -> None:
        self._send(f"lose-commit-reply {slot}" + (f" {backend}" if backend is not None else ""))

    def retarget(self, host: str, port: int, *, keep: bool = False) -> None:
        """New connections go to *host*:*port*; open ones are cut, unless *keep*."""
        self._send(f"target {host} {port}" + (" keep" if keep else ""))

    def close(self) -> None:
        try:
            self._stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stdout.close()


if __name__ == "__main__":
    asyncio.run(_main((sys.argv[1], int(sys.argv[2])), int(sys.argv[3])))
