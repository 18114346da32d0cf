"""The janitor: a small process that cleans up after the harness if the harness is killed.

The harness starts it (``python -m pg_job_chaos.harness.janitor``) in its own session, holding the write end
of its stdin, and registers every resource it creates: worker process groups, the PostgreSQL
server, PgBouncer, their temp directories, a database and role on a user's server, a container. On a clean
exit the harness cleans up itself and sends ``done``. If the harness dies -- even by SIGKILL --
the pipe closes, the janitor reads EOF and removes what is still registered, then exits.

Protocol: one JSON object per line, ``{"op": ..., "key": ..., ...}``; ``forget`` drops a key.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from ..core import procs

# Order of cleanup on EOF: stop what writes before removing where it writes.
_ORDER = ("killpg", "kill", "nft", "dropdb", "container", "postgres", "rmtree")


def _do(task: dict) -> None:
    op = task["op"]
    if op == "killpg":
        procs.killpg(task["pgid"], signal.SIGKILL)
    elif op == "kill":  # a process of ours (PgBouncer): only if the pid is still the one we started
        if procs.process_start_time(task["pid"]) == task.get("start"):
            procs.terminate(task["pid"])
    elif op == "nft":  # a partition's nftables table
        subprocess.run(["nft", "delete", "table", "inet", task["table"]], check=False, capture_output=True)
    elif op == "postgres":
        procs.stop_server(task["pid"])
    elif op == "rmtree":
        subprocess.run(["rm", "-rf", "--one-file-system", task["path"]], check=False)
    elif op == "dropdb":
        from .postgres.dsn import drop_database

        drop_database(task["dsn"], task["database"], task.get("role"))
    elif op == "container":
        from .postgres.docker import remove_container

        remove_container(task["id"])


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    tasks: dict[str, dict] = {}
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("op") == "done":
            return 0
        if msg.get("op") == "forget":
            tasks.pop(msg.get("key"), None)
        else:
            tasks[msg["key"]] = msg
    # EOF without "done": the harness died. Clean up what it left.
    for op in _ORDER:
        for task in [t for t in tasks.values() if t["op"] == op]:
            try:
                _do(task)
            except Exception as exc:  # keep going: one failure must not leave the rest behind
                print(f"pg-job-chaos janitor: {op} failed: {exc}", file=sys.stderr)
    return 0


class Janitor:
    """Harness side of the janitor. ``register`` and ``forget`` are cheap and never raise."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __spec__.name],  # pg_job_chaos.harness.janitor, as installed
            stdin=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C at the terminal must not take it down with us
            text=True,
        )
        assert self._proc.stdin is not None  # stdin=PIPE
        self._stdin = self._proc.stdin
        self._n = 0

    @property
    def fd(self) -> int:
        """The pipe's write end: a forked child must close it, or the janitor never sees EOF."""
        return self._stdin.fileno()

    def register(self, op: str, **fields) -> str:
        # Hazard: a forked process (a slot) keeps this object, its counter and the pipe: a key of the
        # counter alone was made twice, by the slot and by its parent, and the slot's forget dropped the
        # parent's registration -- a harness killed then left that slot's run directory (one a CI run).
        self._n += 1
        key = f"{op}-{os.getpid()}-{self._n}"
        self._send({"op": op, "key": key, **fields})
        return key

    def forget(self, key: str) -> None:
        self._send({"op": "forget", "key": key})

    def _send(self, msg: dict) -> None:
        try:
            self._stdin.write(json.dumps(msg) + "\n")
            self._stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def close(self) -> None:
        """Tell the janitor all is clean and wait for it (bounded)."""
        self._send({"op": "done"})
        try:
            self._stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


if __name__ == "__main__":
    sys.exit(main())
