"""The double-import trap: with the checkout on ``sys.path`` its layer folders are importable under
their bare names too (``import core``), and a module imported both ways exists twice -- two
``CATALOGUE`` registries, two ``UsageError`` classes that ``except`` tells apart. Product code
imports relatively, so importing all of it (the CLI, the plugin, the search engine, every module of
every layer, every built-in design) leaves no bare layer name in ``sys.modules`` and no file loaded
twice. ``tests/conftest.py`` checks the same at the end of every test session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT, double_imports

# Run in a fresh interpreter, the checkout first on sys.path (as run.py and a bare checkout have it).
CHILD = r"""
import contextlib, importlib, io, json, pkgutil, sys
sys.path.insert(0, {root!r})
import pg_job_chaos
assert pg_job_chaos.__file__.startswith({root!r}), pg_job_chaos.__file__

import pg_job_chaos.harness.cli.main as cli
import pg_job_chaos.plugin
import pg_job_chaos.harness.engine.search
import pg_job_chaos.harness.janitor
import pg_job_chaos.harness.runner
for name in pg_job_chaos.__all__:  # the lazily loaded public API
    getattr(pg_job_chaos, name)
with contextlib.redirect_stdout(io.StringIO()):  # the CLI's own lazy imports
    for argv in (["--version"], ["--help"], ["--list-faults"], ["experiment", "--help"], ["bench", "--help"]):
        assert cli.main(argv) == 0, argv

skipped = []  # modules that need an optional library this machine lacks (the libraries extra)
def load(name):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] in ("pg_job_chaos", *pg_job_chaos.LAYERS):
            raise
        skipped.append(f"{{name}} (no {{exc.name}})")

for mod in ["pg_job_chaos." + m.name for m in pkgutil.iter_modules([pg_job_chaos.__path__[0]])]:
    if not mod.endswith("__main__"):
        load(mod)
for layer in pg_job_chaos.LAYERS:
    pkg = load("pg_job_chaos." + layer)
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        load(m.name)
from pg_job_chaos.workers import DESIGNS, LIBRARIES, load_design
for design in [*DESIGNS, *LIBRARIES]:
    try:
        load_design(design)
    except Exception as exc:
        skipped.append(f"design {{design}} ({{exc}})")
print(json.dumps({{"modules": {{n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())}},
                  "skipped": skipped}}))
"""


def test_importing_all_product_code_imports_no_bare_layer_and_no_module_twice(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    r = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT))], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    modules = out["modules"]
    assert not double_imports(modules), double_imports(modules)
    # it did import what it says: every layer, the CLI, the plugin, the engine (a check that saw nothing
    # would pass anything)
    for name in ("pg_job_chaos.harness.cli.main", "pg_job_chaos.plugin", "pg_job_chaos.harness.engine.search",
                 "pg_job_chaos.core.schedule", "pg_job_chaos.faults.catalogue",
                 "pg_job_chaos.workers.builtin.lease", "pg_job_chaos.properties", "pg_job_chaos.adapters",
                 "pg_job_chaos.session"):
        assert name in modules, name
    assert len([n for n in modules if n.startswith("pg_job_chaos.")]) > 80
    print("skipped (optional libraries missing):", out["skipped"])


def test_the_check_sees_a_bare_layer_and_a_module_loaded_twice():
    modules = {
        "pg_job_chaos.core.errors": str(ROOT / "core" / "errors.py"),
        "core.errors": str(ROOT / "core" / "errors.py"),  # bare, and the same file twice
        "pg_job_chaos": str(ROOT / "pg_job_chaos" / "__init__.py"),
        "pg_job_chaos.pg_job_chaos": str(ROOT / "pg_job_chaos" / "__init__.py"),
        "coreutils": None, "harnessed": "/elsewhere/harnessed.py", "__main__": str(ROOT / "run.py"),
        "json": json.__file__,
    }
    found = double_imports(modules)
    assert found == [
        f"core.errors (bare layer name, from {ROOT / 'core' / 'errors.py'})",
        "core.errors and pg_job_chaos.core.errors: one file, core/errors.py, imported twice",
        "pg_job_chaos and pg_job_chaos.pg_job_chaos: one file, pg_job_chaos/__init__.py, imported twice",
    ], found


def test_a_virtual_environment_kept_in_the_checkout_is_not_the_checkouts_code(tmp_path):
    """Most users keep their venv in the project (``.venv/``): a module of an installed package loaded
    under two names there (pytest's own ``_pytest._py.error`` is) is not a file of the checkout."""
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    error = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "_pytest" / "_py" / "error.py"
    error.parent.mkdir(parents=True)
    error.write_text("")
    ours = tmp_path / "core" / "x.py"
    ours.parent.mkdir()
    ours.write_text("")
    modules = {"_pytest._py.error": str(error), "py.error": str(error),
               "pg_job_chaos.core.x": str(ours), "pg_job_chaos.pg_job_chaos.core.x": str(ours)}
    assert double_imports(modules, tmp_path) == [
        "pg_job_chaos.core.x and pg_job_chaos.pg_job_chaos.core.x: one file, core/x.py, imported twice"]
