"""The ``partition`` network fault: silence at the packet level, with nftables, as root.

A proxy that stops forwarding still has its kernel acknowledge the bytes, so keepalives and
``tcp_user_timeout`` never fire. Here the worker's packets to and from its proxy's port are dropped
on the loopback (an ``output`` hook on ``lo``; nothing else is touched): no RST, no FIN, nothing.
Each partition is one nftables table of its own (``pgjc_<pid>_<port>``), registered with the janitor,
so a SIGKILLed harness leaves no rule behind; healing deletes the table.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ...core.errors import HarnessError

INSTALL = "apt-get install -y nftables (and run as root)"


def available() -> str | None:
    """None when partitions can be made here, else why not (one line)."""
    if os.geteuid() != 0:
        return f"the partition fault needs root and nftables: {INSTALL}"
    if shutil.which("nft") is None:
        return f"the partition fault needs nftables: {INSTALL}"
    return None


def table_name(port: int) -> str:
    return f"pgjc_{os.getpid()}_{port}"


def _nft(*args: str) -> None:
    out = subprocess.run(["nft", *args], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise HarnessError(f"nft {' '.join(args)} failed: {out.stderr.strip()}")


def drop(port: int) -> str:
    """Drop every loopback packet to or from 127.0.0.1:*port*; returns the table to :func:`heal`."""
    table = table_name(port)
    _nft("add", "table", "inet", table)
    _nft("add", "chain", "inet", table, "out", "{ type filter hook output priority 0; policy accept; }")
    _nft("add", "rule", "inet", table, "out", "oif", "lo", "tcp", "dport", str(port), "drop")
    _nft("add", "rule", "inet", table, "out", "oif", "lo", "tcp", "sport", str(port), "drop")
    return table


def heal(table: str) -> None:
    """Delete the partition's table; one already gone is not an error."""
    subprocess.run(["nft", "delete", "table", "inet", table], capture_output=True, timeout=30)
