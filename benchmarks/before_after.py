"""The default search on an earlier commit and on this checkout, alternating, in one run.

    python benchmarks/before_after.py 5b1f760                      # the main job, 3 pairs
    python benchmarks/before_after.py 5b1f760 --pairs 5 -- --design lease-heartbeat --faults crash,pause

Makes a git worktree of REF in a temporary directory (removed at the end), then runs
``python run.py ARGS --seed 1 -q --json FILE`` there and here, alternately (this machine is noisy:
alternating pairs share its noise), each with a fresh example database, and prints per side the
wall-clock seconds, the runs and the small-scope runs of every pair, the medians, and the ratio of
the medians (after / before). A figure, not a test: speed is measured here, not asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["--design", "lease", "--faults", "crash,overrun"]


def once(checkout: Path, args: list[str], scratch: Path) -> dict:
    out = scratch / "result.json"
    env = dict(os.environ, PYTHONPATH=str(checkout), XDG_CACHE_HOME=str(scratch / "cache"))
    t = time.monotonic()
    r = subprocess.run([sys.executable, str(checkout / "run.py"), *args, "--seed", "1", "-q", "--json",
                        str(out), "--out", str(scratch / "out")], cwd=scratch, env=env, capture_output=True,
                       text=True, timeout=1800)
    seconds = time.monotonic() - t
    if r.returncode not in (0, 1):
        raise SystemExit(f"{checkout}: exit {r.returncode}\n{r.stderr[-2000:]}")
    data = json.loads(out.read_text())
    runs = data.get("small_scope_runs", 0)
    return {"seconds": seconds, "small_scope": runs, "exit": r.returncode}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ref", help="the earlier commit (anything git rev-parse takes)")
    p.add_argument("--pairs", type=int, default=3)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: the search's arguments
    ns = p.parse_args(argv[:cut])
    args = argv[cut + 1:] or DEFAULT
    with tempfile.TemporaryDirectory(prefix="pgjc-before-") as tmp:
        before = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), ns.ref],
                       check=True, capture_output=True)
        try:
            sides: dict[str, list[dict]] = {"before": [], "after": []}
            for i in range(ns.pairs):
                for side, checkout in (("before", before), ("after", ROOT)):
                    scratch = Path(tmp) / f"{side}-{i}"
                    scratch.mkdir()
                    sides[side].append(once(checkout, args, scratch))
                    r = sides[side][-1]
                    print(f"pair {i + 1} {side:<6} {r['seconds']:6.1f} s, {r['small_scope']} small-scope "
                          f"runs, exit {r['exit']}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                           check=False, capture_output=True)
    med = {s: statistics.median(r["seconds"] for r in rs) for s, rs in sides.items()}
    print(f"{' '.join(args)}: before ({ns.ref}) median {med['before']:.1f} s, "
          f"after median {med['after']:.1f} s: {med['after'] / med['before']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
