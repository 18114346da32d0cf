"""The layers hold: no import goes up a layer or sideways between packages of one layer, and no
module imports close a cycle. Every import counts, at module level and inside functions.

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
    # real queue libraries hosted through workers/hosted.py; named by string in workers.LIBRARIES, imported
    # by no harness module (each needs its library, an optional extra)
    "adapters": 3,
    "harness": 3,  # orchestration: provisioning, supervisor, runner, search, report, CLI, experiments
    "run": 4,  # run.py
    "pg_job_chaos": 4,  # the public API for users' own tests: the pytest plugin, the schedule strategy
}
SKIP = ("tests", "benchmarks", "examples", "docs", "build")


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
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        for n in names:
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
            if other == top or other not in LAYERS:
                continue
            if LAYERS[other] >= LAYERS[top]:
                how = "sideways" if LAYERS[other] == LAYERS[top] else "up"
                out.append(f"{m} imports {t}: {how} from layer {LAYERS[top]} ({top}) to {LAYERS[other]} ({other})")
    out += [f"import cycle: {' <-> '.join(c)}" for c in cycles(graph)]
    return out


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


if __name__ == "__main__":
    found = violations(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    print("\n".join(found))
    print(f"{len(found)} violations")
