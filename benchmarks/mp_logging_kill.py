"""Is multiprocessing-logging safe when forked loggers die mid-burst?  An experiment.

Each *trial* runs in a fresh interpreter (so a hang at exit is observable and bounded):

1. the trial process configures the root logger with a collecting handler and calls
   ``multiprocessing_logging.install_mp_handler()`` (start method ``fork``);
2. it forks ``--children`` children that log in a tight loop (``--size`` bytes of payload per
   line), then for ``--rounds`` rounds: waits a random 5-50 ms, ends one child mid-burst
   (``SIGKILL``, or -- with ``--how exit`` -- the child itself calls ``os._exit(1)`` at a random
   moment, the way harness workers leave), logs a marker line of its own, and checks within
   ``--wait`` seconds that (a) its marker reached the handler and (b) every surviving child has
   logged a newer line; then forks a replacement;
3. it stops at the first failed round, reports whether the queue's cross-process write lock
   (``Queue._wlock``) is still held by nobody alive, kills every child, and exits.

The driver runs ``--trials`` trials, each with a hard ``--timeout`` (a trial whose interpreter
does not exit in time -- the Queue feeder thread's join at exit -- is killed and counted).

    python benchmarks/mp_logging_kill.py --trials 20
    python benchmarks/mp_logging_kill.py --trials 20 --how exit
    python benchmarks/mp_logging_kill.py --trials 20 --size 20000

Prints one JSON line per trial and a summary line.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import logging
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time


class Collect(logging.Handler):
    """The handler multiprocessing-logging wraps: remembers the last line seen from each source."""

    def __init__(self):
        super().__init__()
        self.last: dict[str, int] = {}
        self.cond = threading.Condition()

    def emit(self, record):
        src, _, seq = record.getMessage().partition(" ")
        with self.cond:
            self.last[src] = int(seq.split(" ", 1)[0])
            self.cond.notify_all()

    def wait_for(self, want: dict[str, int], timeout: float) -> list[str]:
        """Wait until every source in *want* has logged a line numbered above the given one."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                missing = [s for s, n in want.items() if self.last.get(s, -1) <= n]
                left = end - time.monotonic()
                if not missing or left <= 0:
                    return missing
                self.cond.wait(left)


def child(name: str, size: int, exit_after: float | None) -> None:
    # Die with the trial: a trial killed by the driver's timeout must not leave children logging
    # into a queue nobody reads (seen: orphans growing to 6 GB each).
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    log = logging.getLogger("bench.child")
    pad = "x" * size
    end = time.monotonic() + exit_after if exit_after is not None else None
    seq = 0
    try:
        while True:
            seq += 1
            log.info("%s %d %s", name, seq, pad)
            if end is not None and time.monotonic() >= end:
                os._exit(1)
            if seq % 64 == 0:
                time.sleep(0.001)  # a burst, not an unbounded memory balloon in the feeder's buffer
    finally:
        os._exit(0)


def trial(args) -> dict:
    import multiprocessing_logging

    multiprocessing.set_start_method("fork", force=True)
    ctx = multiprocessing.get_context("fork")
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    sink = Collect()
    root.addHandler(sink)
    multiprocessing_logging.install_mp_handler()
    mp_handler = root.handlers[0]
    rng = random.Random(args.seed)
    kids: dict[str, multiprocessing.Process] = {}
    serial = 0

    def fork(exit_after=None):
        nonlocal serial
        serial += 1
        name = f"c{serial}"
        p = ctx.Process(target=child, args=(name, args.size, exit_after), daemon=False)
        p.start()
        kids[name] = p

    for _ in range(args.children):
        fork()
    result = {"rounds_ok": 0, "failed": None}
    parent = logging.getLogger("bench.parent")
    for r in range(1, args.rounds + 1):
        if args.how == "kill":
            time.sleep(rng.uniform(0.005, 0.05))
            victim = rng.choice(sorted(kids))
            os.kill(kids[victim].pid, signal.SIGKILL)
            kids.pop(victim).join(5)
        else:  # a child of its own that leaves by os._exit(1) mid-burst, as harness workers do
            fork(exit_after=rng.uniform(0.005, 0.05))
            victim = f"c{serial}"
            kids.pop(victim).join(5)
        with sink.cond:
            before = {s: sink.last.get(s, 0) for s in kids}
        parent.info("parent %d after ending %s", r, victim)
        before["parent"] = r - 1
        missing = sink.wait_for(before, args.wait)
        if missing:
            result["failed"] = {"round": r, "victim": victim,
                                "parent_lost": "parent" in missing,
                                "survivors_lost": sorted(m for m in missing if m != "parent"),
                                "survivors": len(kids)}
            break
        result["rounds_ok"] = r
        if args.how == "kill":
            fork()
    for p in kids.values():
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.join(5)
    if result["failed"] is not None:
        # Nobody alive but us uses the queue now: if its write lock cannot be taken, a dead child holds it.
        wlock = mp_handler.queue._wlock
        got = wlock.acquire(timeout=2.0)
        if got:
            wlock.release()
        result["failed"]["wlock_leaked"] = not got
    print(json.dumps(result), flush=True)
    return result


def drive(args) -> int:
    me = os.path.abspath(__file__)
    outcomes = []
    for i in range(args.trials):
        cmd = [sys.executable, me, "--trial", "--seed", str(args.seed + i)] + [
            f"--{k}={getattr(args, k)}" for k in ("children", "rounds", "size", "wait", "how")]
        t0 = time.monotonic()
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            hung, stdout, code = False, out.stdout, out.returncode
        except subprocess.TimeoutExpired as e:
            hung, code = True, None
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            # subprocess.run killed the trial's interpreter; its children die by their own hand or
            # were SIGKILLed by the trial before it reached exit.
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        res = json.loads(lines[-1]) if lines else {"rounds_ok": None, "failed": "no result"}
        res.update(trial=i, seconds=round(time.monotonic() - t0, 2), exit_hung=hung, exit_code=code)
        outcomes.append(res)
        print(json.dumps(res), flush=True)
    broke = [o for o in outcomes if o["failed"]]
    summary = {
        "summary": f"{len(broke)} of {len(outcomes)} trials lost later records (parent or survivors)",
        "parent_lost": sum(1 for o in broke if isinstance(o["failed"], dict) and o["failed"]["parent_lost"]),
        "wlock_leaked": sum(1 for o in broke
                            if isinstance(o["failed"], dict) and o["failed"]["wlock_leaked"]),
        "exit_hung": sum(1 for o in outcomes if o["exit_hung"]),
        "median_round_of_failure": (
            sorted(o["failed"]["round"] for o in broke if isinstance(o["failed"], dict))[len(broke) // 2]
            if broke else None),
        "params": {k: getattr(args, k) for k in ("trials", "children", "rounds", "size", "wait", "how")},
    }
    print(json.dumps(summary), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--children", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=50, help="kills per trial (stops at the first failure)")
    ap.add_argument("--size", type=int, default=100, help="payload bytes per log line")
    ap.add_argument("--wait", type=float, default=2.0, help="seconds to wait for lines after each kill")
    ap.add_argument("--how", choices=("kill", "exit"), default="kill")
    ap.add_argument("--timeout", type=float, default=30.0, help="hard bound on one trial's interpreter")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trial", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.trial:
        trial(args)
        return 0
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
