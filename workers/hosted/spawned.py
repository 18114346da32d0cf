"""A job body in a process the library spawned: its worker context, rebuilt there.

Some libraries run a task in a process of their own -- chancy's default ``ProcessExecutor`` runs
each job in a ``spawn`` ed pool child: a fresh interpreter that imports the task's module and
shares nothing with the forked worker but its environment and its process group. The harness's
body needs its worker context there (the schedule, the execution log, the tenant mode, the
watched points), so the forked worker leaves it behind before the library starts its pool:

- :func:`export` (in the forked worker) pickles the worker's :class:`~workers.body.execution.WorkerSpec` into
  the run directory and names the file in the environment (:data:`ENV`), which a spawned child
  inherits;
- :func:`context` (in the child, on its first job) rebuilds the :class:`~workers.body.context.WorkerContext`
  from it, once per child.

The child writes to the worker's own execution log (one ``os.write`` per line with ``O_APPEND``:
records of two processes never interleave within a line); every record carries the child's ``pid``,
and at a strike point the supervisor signals that pid to go on (``WorkerProcess.go``). The child is
in the worker's process group, so a ``kill`` or ``pause`` of the worker reaches it too, and it asks
to die with the process that spawned it.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import threading
import time
from pathlib import Path

from ...core import procs
from ...core.execlog import count_started
from ..body import statements
from ..body.context import WorkerContext
from ..body.execution import STRIKE_SIGNAL, WorkerSpec

ENV = "PGJC_SPAWNED_SPEC"
SUFFIX = ".spawned-spec.pickle"

_context: WorkerContext | None = None  # this child's, built on its first job


def export(ctx: WorkerContext) -> dict[str, str]:
    """Leave *ctx*'s spec for the processes the library is about to spawn; returns the environment
    entries set (the caller removes them when its worker loop returns, if it runs in-process)."""
    path = Path(ctx.spec.run_dir) / f"{ctx.identity}{SUFFIX}"
    path.write_bytes(pickle.dumps(ctx.spec))
    os.environ[ENV] = str(path)
    return {ENV: str(path)}


def unexport(entries: dict[str, str]) -> None:
    for key in entries:
        os.environ.pop(key, None)


def context() -> WorkerContext:
    """The worker context in a spawned child (built once). Raises RuntimeError outside one."""
    global _context
    if _context is not None:
        return _context
    path = os.environ.get(ENV)
    if not path:
        raise RuntimeError(f"a hosted job ran in a process with no worker context ({ENV} is not set): the "
                           "worker must call workers.hosted.spawned.export(ctx) before the library spawns")
    spec: WorkerSpec = pickle.loads(Path(path).read_bytes())
    procs.die_with_parent(signal.SIGKILL, os.getppid())
    # The go at a strike point is this process's STRIKE_SIGNAL, taken by sigtimedwait: blocked here,
    # in the thread that runs the jobs (a pool child's main thread). Hazard: chancy also sends it to
    # cancel a job (executors/process.py, only on a cancel or a stop with cancellation); a cancel
    # then waits until a point's sigtimedwait takes the signal for a go.
    signal.pthread_sigmask(signal.SIG_BLOCK, {STRIKE_SIGNAL})
    ctx = WorkerContext(spec)
    statements.install(ctx)
    ctx.log.write("spawned-child", parent=os.getppid())
    _context = ctx
    return ctx


def started_here(ctx: WorkerContext) -> int:
    """How many executions this worker's log records as started, by any of its processes: the
    forked worker's dequeue budget when the jobs run in its library's children."""
    try:
        data = Path(ctx.log.path).read_bytes()
    except OSError:
        return 0
    return count_started(data)


def _gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped by the library counts) or never was."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def watch(ctx: WorkerContext, stop: threading.Event, *, library: int | None = None) -> threading.Thread:
    """A thread of the forked worker that logs ``process-exit`` (``exited``: the pid) once for each
    child that logged records and is gone: an execution in a child killed by ``os._exit`` or a
    signal writes no end of its own, and the history ends it at ``since``, the last poll that saw the
    child alive (polls every ``ctx.poll``): at most one poll early, never after the death -- which
    the library notices before it can run the job again or record its failure. *library*: the pid of
    the process that is the library itself (a worker contract's client): its death is marked
    ``library``, since no library lived on to see the execution fail."""
    me = os.getpid()

    def loop() -> None:
        offset = 0
        alive = set()
        seen_at = time.monotonic()
        while not stop.wait(max(ctx.poll, 0.02)):
            try:
                with open(ctx.log.path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            cut = data.rfind(b"\n") + 1
            offset += cut
            for line in data[:cut].splitlines():
                try:
                    pid = json.loads(line).get("pid")
                except ValueError:
                    continue
                if pid and pid != me:
                    alive.add(pid)
            now = time.monotonic()
            for pid in sorted(p for p in alive if _gone(p)):
                alive.discard(pid)
                # since: the last poll that saw it alive -- it died in (since, now]
                ctx.log.write("process-exit", exited=pid, since=seen_at,
                              **({"library": True} if pid == library else {}))
            seen_at = now

    t = threading.Thread(target=loop, name="pgjc-child-watch", daemon=True)
    t.start()
    return t
