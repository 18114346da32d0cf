"""The fault proxy (harness/net/proxy.py) against a local echo server: forwarding, added latency,
reset with RST, and its end when its stdin closes. No database."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from pg_job_chaos.harness.net.proxy import Proxies


@pytest.fixture
def echo():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=lambda c=conn: _echo(c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()


def _echo(conn):
    with conn:
        try:
            while data := conn.recv(4096):
                conn.sendall(data)
        except OSError:  # the proxy's reset reaches this side too
            pass


def _roundtrip(port: int, payload: bytes = b"ping") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)
        return s.recv(4096)


def test_forwards_each_slot_and_adds_latency_both_ways(echo):
    proxies = Proxies("127.0.0.1", echo, 2)
    try:
        assert set(proxies.ports) == {1, 2} and _roundtrip(proxies.ports[2]) == b"ping"
        proxies.latency(1, 0.2)
        t = time.monotonic()
        assert _roundtrip(proxies.ports[1]) == b"ping"
        assert time.monotonic() - t >= 0.4  # 0.2 s each way: a lower bound, not a speed
        proxies.latency(1, 0)
    finally:
        proxies.close()


def test_reset_cuts_open_connections_with_rst(echo):
    proxies = Proxies("127.0.0.1", echo, 1)
    try:
        s = socket.create_connection(("127.0.0.1", proxies.ports[1]), timeout=10)
        s.sendall(b"a")
        assert s.recv(10) == b"a"
        proxies.reset(1)
        with pytest.raises(ConnectionResetError):
            s.sendall(b"b")
            s.recv(10)
            s.sendall(b"c")  # whichever call first meets the RST
            s.recv(10)
        s.close()
        assert _roundtrip(proxies.ports[1]) == b"ping"  # new connections go through again
    finally:
        proxies.close()


def test_it_ends_when_its_stdin_closes(echo):
    proxies = Proxies("127.0.0.1", echo, 1)
    proxies.proc.stdin.close()
    assert proxies.proc.wait(timeout=10) == 0
    proxies.proc.stdout.close()


# --- lose-commit-reply against a fake PostgreSQL server -----------------------------------------------

def _msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


COMMITTED = _msg(b"C", b"COMMIT\0") + _msg(b"Z", b"I")
LOGIN_OK = _msg(b"R", struct.pack("!i", 0))  # AuthenticationOk: a server's first message


@pytest.fixture
def fake_pg():
    """Answers each connection with AuthenticationOk, BackendKeyData (pids 101, 102, ...) """ \
    """and ReadyForQuery, then every
    client send with a commit's reply. ``seen`` collects how each connection ended on its side."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    seen: list[str] = []
    pids = iter(range(101, 200))

    def serve(conn, pid):
        with conn:
            try:
                conn.sendall(LOGIN_OK + _msg(b"K", struct.pack("!ii", pid, 1)) + _msg(b"Z", b"I"))
                while conn.recv(4096):
                    conn.sendall(COMMITTED)
                seen.append(f"{pid} eof")
            except ConnectionResetError:
                seen.append(f"{pid} reset")
            except OSError:
                seen.append(f"{pid} error")

    def accept():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn, next(pids)), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield srv.getsockname()[1], seen
    srv.close()


@pytest.fixture
def login():
    """Connect through the proxy and read the login; every socket is closed at the end."""
    opened: list[socket.socket] = []

    def connect(port: int) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        opened.append(s)
        got = b""
        while len(got) < 9 + 13 + 6:  # R (9 bytes), K (13) and Z (6)
            got += s.recv(4096)
        return s

    yield connect
    for s in opened:
        s.close()


def _commit(s: socket.socket) -> bytes | str:
    """Send a COMMIT: its whole reply, or "reset" (an RST) or "eof" (a FIN) before the reply was whole."""
    s.sendall(b"Q\0\0\0\x0bCOMMIT\0")
    got = b""
    try:
        while len(got) < len(COMMITTED):
            if not (chunk := s.recv(4096)):
                return "eof"
            got += chunk
    except ConnectionResetError:
        return "reset" if not got else "reset after part of the reply"
    return got


def _wait_for(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.01)
    return cond()


def test_lose_commit_reply_withholds_the_targeted_connections_commit_reply_and_resets_it(fake_pg, login):
    port, seen = fake_pg
    proxies = Proxies("127.0.0.1", port, 1)
    try:
        first, second = login(proxies.ports[1]), login(proxies.ports[1])  # backends 101 and 102
        proxies.lose_commit_reply(1, 102)
        assert _commit(first) == COMMITTED  # another connection of the slot: spared
        assert _commit(second) == "reset"  # RST, not FIN; no byte of the reply
        assert _wait_for(lambda: "102 reset" in seen)  # the server's side was reset too
        assert _commit(first) == COMMITTED  # one strike: disarmed
    finally:
        proxies.close()


def test_lose_commit_reply_without_a_known_backend_strikes_the_slots_next_commit(fake_pg, login):
    port, _ = fake_pg
    proxies = Proxies("127.0.0.1", port, 2)
    try:
        other = login(proxies.ports[2])
        proxies.lose_commit_reply(1, 999)  # not a backend of slot 1's: any connection of it
        assert _commit(other) == COMMITTED  # another slot
        assert _commit(login(proxies.ports[1])) == "reset"  # a connection opened after the arming
        assert _commit(login(proxies.ports[1])) == COMMITTED
        proxies.lose_commit_reply(1)
        assert _commit(login(proxies.ports[1])) == "reset"
    finally:
        proxies.close()


def test_a_targeted_connection_that_closes_first_disarms_it(fake_pg, login):
    port, _ = fake_pg
    proxies = Proxies("127.0.0.1", port, 1)
    try:
        doomed = login(proxies.ports[1])
        proxies.lose_commit_reply(1, 101)
        doomed.close()
        time.sleep(0.2)  # the proxy sees the close
        assert _commit(login(proxies.ports[1])) == COMMITTED
    finally:
        proxies.close()
