"""The wheel is one name, and nothing is left out of it: ``pyproject.toml``'s ``[tool.setuptools]``
``packages`` list is the tree's packages, its ``package-dir`` maps every layer of
:data:`pg_job_chaos.LAYERS`, and every data file beside the code is package data.

A sub-package setuptools is not told about is silently missing from the wheel (the checkout, the
editable install and the whole suite still see it): this test is what notices. The wheel itself is
built and installed by ``tests/integration/test_wheel.py``.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pg_job_chaos

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "pg_job_chaos"
NOT_SHIPPED = ("tests", "benchmarks", "examples", "docs", "build")  # top-level folders outside the wheel


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _skipped(path: Path) -> bool:
    # node_modules: what npm ci installs beside the Node client (workers/clients/node), never shipped
    return any(part in ("__pycache__", "node_modules") or part.startswith(".") or part.endswith(".egg-info")
               for part in path.parts)


def _shipped_as_data(rel: Path) -> bool:
    """*rel* (from the root) matches a package-data pattern of its layer's package as a path: the
    contract's clients and the scripts another runtime runs (``clients/python/*.py``)."""
    data = _setuptools()["package-data"]
    layer = rel.parts[0]
    inside = Path(*rel.parts[1:]).as_posix()
    return any(fnmatch.fnmatch(inside, p) for p in data.get(f"pg_job_chaos.{layer}", []) if "/" in p)


def tree_packages(root: Path, package_dir: dict[str, str]) -> dict[str, Path]:
    """Dotted package name -> folder, for every folder with an ``__init__.py`` under the mapped
    folders, named as the wheel names it (``workers/x`` is ``pg_job_chaos.workers.x``)."""
    out: dict[str, Path] = {}
    for name, folder in package_dir.items():
        base = root / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if _skipped(rel):
                continue
            out[".".join([name, *rel.parts])] = init.parent
    return out


def test_packages_list_is_every_package_of_the_tree():
    st = _setuptools()
    found = tree_packages(ROOT, st["package-dir"])
    listed = set(st["packages"])
    missing, stale = sorted(set(found) - listed), sorted(listed - set(found))
    assert not missing, \
        f"packages with an __init__.py that pyproject.toml does not list (not in the wheel): {missing}"
    assert not stale, f"pyproject.toml lists packages the tree does not have: {stale}"
    assert len(st["packages"]) == len(listed), "pyproject.toml lists a package twice"


def test_package_dir_maps_every_layer_and_nothing_else():
    mapping = _setuptools()["package-dir"]
    want = {NAMESPACE: NAMESPACE, **{f"{NAMESPACE}.{layer}": layer for layer in pg_job_chaos.LAYERS}}
    assert mapping == want
    for folder in mapping.values():
        assert (ROOT / folder / "__init__.py").is_file(), folder


def test_every_top_level_package_is_a_layer():
    """A new top-level folder with an ``__init__.py`` is a layer (add it to ``LAYERS`` and
    ``package-dir``) or one of the folders that are never shipped."""
    tops = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert tops - {NAMESPACE, *NOT_SHIPPED} == set(pg_job_chaos.LAYERS)


def test_no_folder_of_code_is_left_a_namespace_package():
    """A folder of ``.py`` files without ``__init__.py`` under a layer is not listed, so not shipped."""
    bare = []
    for layer in pg_job_chaos.LAYERS:
        for py in (ROOT / layer).rglob("*.py"):
            folder = py.parent
            if (not _skipped(folder.relative_to(ROOT)) and not (folder / "__init__.py").is_file()
                    and not _shipped_as_data(py.relative_to(ROOT))):
                bare.append(str(folder.relative_to(ROOT)))
    assert not bare, f"folders of code without __init__.py (left out of the wheel): {sorted(set(bare))}"


def test_every_data_file_beside_the_code_is_package_data():
    """``.sql`` and ``.html`` files are read at run time from beside the module that uses them; any
    other kind of file in a package folder would be missing from the wheel."""
    patterns = [p for pats in _setuptools()["package-data"].values() for p in pats]
    data, unshipped = [], []
    for folder in [NAMESPACE, *pg_job_chaos.LAYERS]:
        for f in (ROOT / folder).rglob("*"):
            rel = f.relative_to(ROOT)
            if not f.is_file() or _skipped(rel) or f.suffix in (".py", ".pyc"):
                continue
            shipped = any(fnmatch.fnmatch(f.name, p) for p in patterns) or _shipped_as_data(rel)
            (data if shipped else unshipped).append(str(rel))
    assert not unshipped, f"files in package folders that package-data leaves out of the wheel: {unshipped}"
    assert "workers/body/body.sql" in data and "harness/report/report.html" in data  # the test sees them


def test_the_checker_finds_a_new_sub_package(tmp_path):
    """A checker that finds nothing passes anything: a folder added with an ``__init__.py`` shows."""
    for pkg in ("pg_job_chaos", "harness", "harness/engine", "harness/new", "harness/new/deeper",
                "harness/__pycache__", "harness/x.egg-info"):
        (tmp_path / pkg).mkdir(parents=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    found = tree_packages(tmp_path, {NAMESPACE: NAMESPACE, "pg_job_chaos.harness": "harness"})
    assert set(found) == {"pg_job_chaos", "pg_job_chaos.harness", "pg_job_chaos.harness.engine",
                          "pg_job_chaos.harness.new", "pg_job_chaos.harness.new.deeper"}


def test_the_test_extra_can_build_the_wheel_offline():
    """``tests/integration/test_wheel.py`` builds with ``--no-build-isolation``: the build-system's
    requirements must come with ``pip install -e '.[test]'``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requires = config["build-system"]["requires"]
    test_extra = config["project"]["optional-dependencies"]["test"]
    assert set(requires) <= set(test_extra), (requires, test_extra)
