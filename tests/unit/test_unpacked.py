"""Product code assigns one name a line: no packed assignment such as ``self.a, self.b = a, b``.

Packing (a tuple of targets given a tuple display of as many independent values) was a way to
fit a line count; there is no line count (``docs/internals.md``, "Size"). Kept, because they are
not packing: unpacking a value (``host, port = split(x)``, ``for a, b in ...``), and a swap or
rotation (``a, b = b, a``), where a later value reads a name assigned earlier in the statement,
so that one assignment a line would change what it does. ``a = 1; b = 2`` is ruff's E702.

Run as a script (``python tests/unit/test_unpacked.py [ROOT]``) it prints every packed
assignment of a tree.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = ("tests", "benchmarks", "examples", "docs", "build", "site")
SEQUENCES = (ast.Tuple, ast.List)
READS = (ast.Name, ast.Attribute, ast.Subscript)


def product_files(root: Path) -> list[Path]:
    """Every ``.py`` file of the product under ``root``: not tests, benchmarks, examples, docs."""
    found = []
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        if parts[0] not in SKIP and not any(part.startswith(".") for part in parts):
            found.append(path)
    return sorted(found)


def _reads(node: ast.expr) -> set[str]:
    """The names and attribute chains ``node`` reads, spelt as source (``x``, ``self.a``)."""
    return {ast.unparse(n) for n in ast.walk(node) if isinstance(n, READS)}


def _names(targets: list[ast.expr]) -> list[ast.expr]:
    """The assigned expressions of ``targets``, nested tuples and starred targets opened."""
    out: list[ast.expr] = []
    for t in targets:
        if isinstance(t, SEQUENCES):
            out.extend(_names(t.elts))
        elif isinstance(t, ast.Starred):
            out.extend(_names([t.value]))
        else:
            out.append(t)
    return out


def is_swap(targets: list[ast.expr], values: list[ast.expr]) -> bool:
    """True if a value reads a target assigned before it: one a line would change it."""
    for i, value in enumerate(values):
        if _reads(value) & {ast.unparse(n) for n in _names(targets[:i])}:
            return True
    return False


def packed(source: str) -> list[tuple[int, str]]:
    """The packed assignments of ``source``: (line, the statement), swaps left out."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, SEQUENCES):
            continue
        values = node.value.elts
        for target in node.targets:
            if (
                isinstance(target, SEQUENCES)
                and len(target.elts) == len(values)
                and not is_swap(target.elts, values)
            ):
                found.append((node.lineno, ast.unparse(node)))
    return found


def violations(root: Path) -> list[str]:
    """Every packed assignment of the product under ``root``, as ``path:line: statement``."""
    out = []
    for path in product_files(root):
        for line, text in packed(path.read_text(encoding="utf-8")):
            out.append(f"{path.relative_to(root)}:{line}: {text}")
    return out


def test_no_packed_assignment_in_product_code() -> None:
    assert violations(ROOT) == []


def test_packed_is_told_from_unpacking_and_swaps() -> None:
    assert [line for line, _ in packed("self.a, self.b = a, b\nx, y = 1, 2\n")] == [1, 2]
    assert packed("a, b = f()\nfor a, b in xs: pass\na, b = b, a\nx, y = y, x + y\n") == []
    # take and clear: the clear comes after the read, so one a line does the same
    assert len(packed("proc, self.p = self.p, None\n")) == 1
    # both on self, neither reads the other
    assert len(packed("self.a, self.b = 1, self.c\n")) == 1
    assert packed("self.a, self.b = 1, self.a.x\n") == []


if __name__ == "__main__":
    print("\n".join(violations(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)))
