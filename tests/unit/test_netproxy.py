"""The fault proxy (harness/net/proxy.py) against a local echo server: forwarding, added latency,
reset with RST, and its end when its stdin closes. No database."""

from __future__ import annotations

import socket
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
