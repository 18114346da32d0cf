"""The layers hold: no import goes up a layer or sideways between packages of one layer, and no
module imports close a cycle. Every import counts, at module level and inside functions.

Installed, every layer is a sub-package of ``pg_job_chaos`` (``pg_job_chaos.workers`` is ``workers/``):
an import of ``pg_job_chaos.X`` is an import of the folder ``X``, and a relative import resolves from the
file's folder, so both spellings are seen. Inside ``harness`` the sub-packages (and its flat modules)
are ordered too (:data:`HARNESS`). No product module may import ``tests``, ``benchmarks`` or ``examples``.

Run as a script (``python tests/unit/test_layers.py [ROOT]``) it prints every violation of a tree.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The layers, lowest first. A package may import its own modules and any package of a lower layer.
LAYERS = {
    "core": 0,  # base: errors, SQL files, schedule, history, execution log, process helpers
    "faults": 1,  # the catalogue every component names
    "workers": 2, "properties": 2,  # the systems under test; the invariants
    # real queue libraries hosted through workers/hosted/protocol.py; named by string in workers.LIBRARIES,
    # imported by no harness module (each needs its library, an optional extra)
    "adapters": 3,
    "harness": 3,  # orchestration: provisioning, supervisor, runner, search, report, CLI, experiments
    "run": 4,  # run.py
    "pg_job_chaos": 4,  # the public API for users' own tests: the pytest plugin, the schedule strategy
}
SKIP = ("tests", "benchmarks", "examples", "docs", "build")
NAMESPACE = "pg_job_chaos"
# harness's own parts, lowest first (same rule: down only, never sideways). The janitor is a flat module
# so that it starts without the provisioning stack, but it is part of provisioning.
HARNESS = {
    "progress": 0, "scales": 0, "net": 0,  # progress lines, time scales, network faults (proxy, partition)
    "postgres": 1, "janitor": 1,  # provisioning: servers, PgBouncer, the article's data; the janitor
    "supervisor": 2, "engine": 2,  # one run's processes; the search engine (given a run function)
    "runner": 3,  # a schedule in, a history out
    "slots": 4, "report": 4,  # parallel runs; rendering a Report (text, JSON, JUnit, HTML, saved files)
    "session": 5, "experiments": 5,  # what a command runs on; the article's measurements
    "corpus": 5,  # the real-bug corpus: cases, versions installed beside the pinned one, their searches
    "bench": 6,  # the benchmark figures
    "cli": 7,  # the command line
}
GROUP = {"janitor": "postgres"}  # one concept, two places
# workers' own parts, lowest first (same rule), each a folder but for three modules of the design boundary.
# The job body and what it stands on; the design protocol both kinds implement (``workers/interface.py``);
# the built-in designs and the hosting of code the harness did not write, beside each other (neither imports
# the other: both build on the body and the protocol); the handle (``workers/design.py``) and the loader
# that builds either on top.
WORKERS = {
    "tenant": 0,  # tenant/: the tenant modes (modes.py) and the setting tracked per connection (track.py)
    "body": 1,  # body/: one execution's steps (execution.py), the statement wrapper, the worker context
    "interface": 2,  # the design protocol and its small types (POOL, Origin, Clock), what designs implement
    # builtin/: the article's designs; hosted/: a library, a user's worker, the worker contract
    "builtin": 3, "hosted": 3,
    "design": 4,  # the boundary: the handle load_design returns, every optional member resolved
    "loading": 5,  # load_design: a design by name or spec, built once, with its origin
}


def modules(root: Path) -> dict[str, Path]:
    """First-party module name -> file, for every .py outside tests, benchmarks and hidden folders."""
    out = {}
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        if any(part in SKIP or part.startswith(".") or part.endswith(".egg-info") for part in rel.parts):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            out[".".join(parts)] = p
    return out


def imports(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    """First-party modules *mod* imports anywhere in its file (an imported name resolves to the
    longest module prefix; an import of an enclosing package does not count: it runs first anyway)."""

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = set()
    layers = {m.split(".")[0] for m in known}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")
                up = up[: len(up) - (node.level - 1)] if node.level > 1 else up
                base = ".".join([*up, base]) if base else ".".join(up)
            # from ... import faults (up to the namespace's root): the names are the modules themselves
            names = [f"{base}.{a.name}" if base else a.name for a in node.names] + ([base] if base else [])
        for n in names:
            head, _, rest = n.partition(".")
            if head == NAMESPACE and rest.split(".")[0] in layers:
                n = rest  # pg_job_chaos.workers.x is workers/x.py
            if n.split(".")[0] in SKIP:
                out.add(n)  # never first-party product code: reported by violations()
                continue
            t = resolve(n)
            if t and t != mod and not mod.startswith(t + "."):
                out.add(t)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def violations(root: Path = ROOT) -> list[str]:
    known = modules(root)
    graph = {m: imports(m, p, known) for m, p in known.items()}
    out = []
    for m in sorted(graph):
        top = m.split(".")[0]
        if top not in LAYERS:
            out.append(f"{m}: package {top!r} has no layer; add it to LAYERS in tests/unit/test_layers.py")
            continue
        for t in sorted(graph[m]):
            other = t.split(".")[0]
            if other in SKIP:
                out.append(f"{m} imports {t}: product code must not import {other}/")
                continue
            if other == top == "harness":
                out += _within_harness(m, t)
                continue
            if other == top == "workers":
                out += _within_workers(m, t)
                continue
            if other == top or other not in LAYERS:
                continue
            if LAYERS[other] >= LAYERS[top]:
                how = "sideways" if LAYERS[other] == LAYERS[top] else "up"
                out.append(f"{m} imports {t}: {how} from layer {LAYERS[top]} ({top}) "
                           f"to {LAYERS[other]} ({other})")
    out += [f"import cycle: {' <-> '.join(c)}" for c in cycles(graph)]
    return out


def _ordered(package: str, order: dict[str, int], group, m: str, t: str) -> list[str]:
    """Within *package*: *m*'s part may import a part of a lower place in *order* (*group* names the
    part a module belongs to), never one of its own place or above."""
    a, b = (group(x.split(".")[1]) for x in (m, t))
    if a == b:
        return []
    table = "HARNESS" if package == "harness" else "WORKERS"
    for part in (a, b):
        if part not in order:
            return [f"{m}: {package} part {part!r} has no layer; "
                    f"add it to {table} in tests/unit/test_layers.py"]
    if order[b] >= order[a]:
        how = "sideways" if order[a] == order[b] else "up"
        return [f"{m} imports {t}: {how} inside {package}, from {a} ({order[a]}) to {b} ({order[b]})"]
    return []


def _within_harness(m: str, t: str) -> list[str]:
    return _ordered("harness", HARNESS, lambda part: GROUP.get(part, part), m, t)


def _within_workers(m: str, t: str) -> list[str]:
    if m == "workers":  # the package's __init__: the public names of its parts
        return []
    if t == "workers":
        return [f"{m} imports the workers package itself: import the part it needs"]
    return _ordered("workers", WORKERS, lambda part: part, m, t)


def test_no_import_goes_up_a_layer_or_closes_a_cycle():
    found = violations()
    assert not found, "\n".join(found)


def test_the_checker_sees_imports_inside_functions_and_cycles(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core" / "a.py").write_text("def f():\n    from harness import b\n")
    (tmp_path / "core" / "c.py").write_text("from core import d\n")
    (tmp_path / "core" / "d.py").write_text("import core.c\n")
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text("")
    (tmp_path / "harness" / "b.py").write_text("from core.a import f\n")
    (tmp_path / "stray.py").write_text("")
    found = violations(tmp_path)
    assert "core.a imports harness.b: up from layer 0 (core) to 3 (harness)" in found
    assert "import cycle: core.a <-> harness.b" in found
    assert "import cycle: core.c <-> core.d" in found
    assert any(f.startswith("stray: package 'stray' has no layer") for f in found)
    assert len(found) == 5, found  # and "core.a imports harness" (the package it imports from)


def test_the_checker_sees_the_trees_relative_and_namespaced_imports():
    """A layer test that passes because it sees nothing is no test: these edges exist."""
    known = modules(ROOT)
    graph = {m: imports(m, p, known) for m, p in known.items()}
    assert "properties" in graph["harness.engine.search"]  # from ...properties import check
    assert "harness.engine.outcome" in graph["harness.engine.search"]  # from .outcome import Run
    assert "harness.engine.search" in graph["pg_job_chaos.session"]  # from .harness.engine.search
    assert "harness.engine.smallscope" in graph["harness.engine.search"]  # from . import smallscope
    assert sum(len(v) for v in graph.values()) > 300


def test_the_checker_sees_namespaced_imports_product_imports_of_tests_and_harness_order(tmp_path):
    for pkg in ("core", "harness", "harness/cli", "harness/engine", "pg_job_chaos"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "core" / "x.py").write_text("from pg_job_chaos.harness.engine import y\n")
    (tmp_path / "harness" / "engine" / "y.py").write_text("from ..cli import z\n"
                                                          "from tests.chaos import planted\n")
    (tmp_path / "harness" / "cli" / "z.py").write_text("from ..engine import w\n")
    (tmp_path / "harness" / "engine" / "w.py").write_text("")
    (tmp_path / "core" / "v.py").write_text("from .. import harness\n")  # up to the namespace's root
    found = violations(tmp_path)
    assert "core.v imports harness: up from layer 0 (core) to 3 (harness)" in found
    assert "core.x imports harness.engine.y: up from layer 0 (core) to 3 (harness)" in found
    assert "harness.engine.y imports harness.cli.z: up inside harness, from engine (2) to cli (7)" in found
    assert "harness.engine.y imports tests.chaos.planted: product code must not import tests/" in found
    assert not any(f.startswith("harness.cli.z") for f in found), found


if __name__ == "__main__":
    found = violations(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    print("\n".join(found))
    print(f"{len(found)} violations")


def test_the_hosting_package_and_the_built_in_designs_stay_apart(tmp_path):
    for folder in ("core", "workers", "workers/hosted", "workers/builtin", "workers/body"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "workers" / "body" / "execution.py").write_text("")
    (tmp_path / "workers" / "interface.py").write_text("from .body.execution import w\n")
    (tmp_path / "workers" / "builtin" / "lease.py").write_text("from ..body.execution import x\n"
                                                               "from ..interface import Clock\n")
    (tmp_path / "workers" / "hosted" / "protocol.py").write_text("from ..builtin.lease import y\n"
                                                                 "from ..body.execution import z\n"
                                                                 "from ..interface import POOL\n")
    found = violations(tmp_path)
    assert found == ["workers.hosted.protocol imports workers.builtin.lease: sideways inside workers, from "
                     "hosted (3) to builtin (3)"], found
    # the design protocol is below both kinds: it may import neither
    (tmp_path / "workers" / "interface.py").write_text("from .hosted.protocol import HostedDesign\n")
    assert "workers.interface imports workers.hosted.protocol: up inside workers, from interface (2) to " \
           "hosted (3)" in violations(tmp_path)
