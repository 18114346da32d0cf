"""The wheel is one name and installs beside a user's project.

From a clean copy of the working tree (its tracked and new files: no build/, ``*.egg-info``,
``__pycache__`` or ``chaos-out``), setuptools builds the wheel the way ``pip install`` would, without
the network (``--no-build-isolation``: the build requirements are in the ``test`` extra). Its only
top-level name is ``pg_job_chaos/``; every module and every ``.sql``/``.html``/``.txt`` file of the layers is
in it. It is installed (``--no-deps``) into a fresh venv that sees the packages of the environment
running this test (psycopg, Hypothesis, pytest, the PostgreSQL wheel), and used from a scratch project
that has its own ``workers`` and ``core`` packages, with no ``PYTHONPATH``. That environment is the
machine's interpreter or, as most users run the suite, a virtual environment: ``--system-site-packages``
would give the inner venv the *base* interpreter's site-packages, without psycopg when the suite runs
in a venv. So the inner venv is made without it, and a ``.pth`` file in its site-packages adds the
running interpreter's site directories after its own (``site.addsitedir``: their ``.pth`` files, the
editable install's among them, are read as ``--system-site-packages`` reads the base's):

* ``import workers, core`` are the project's, ``pg_job_chaos.workers``/``.core`` the wheel's, in one
  interpreter; ``pg_job_chaos`` comes from the venv's site-packages, not the checkout (the outer
  environment has an editable install of this project too: the venv's copy must win);
* the console script (``--help``, ``--version``, ``--list-faults``, ``new-design``: its template is
  package data) and ``python -m pg_job_chaos``;
* the pytest plugin loads in the project's own pytest run;
* one real search (``pg-job-chaos --design lease --faults crash --examples 1``, ~10 s): the
  supervisor, the janitor (``python -m pg_job_chaos.harness.janitor``) and the SQL files, all from the
  wheel; none of them imports the project's ``core`` or ``workers``.

About 25 s in all on a 2-core machine (each step's time is printed: ``pytest -s``).
"""

from __future__ import annotations

import json
import os
import shutil
import site as python_site
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

import pg_job_chaos
from pg_job_chaos.properties import applying
from pg_job_chaos.properties.failover import REPLICA_ONLY
from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # the search starts a PostgreSQL

NEVER_COPIED = ("build", "dist", "chaos-out", "__pycache__", ".git", ".hypothesis", ".pytest_cache",
                ".ruff_cache")
ENV_DROPPED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
# The scratch project's own packages: each records every process that imports it.
SCRATCH_PACKAGE = """import os, sys
MARK = "scratch-{name}"
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "imported.log"), "a") as f:
    f.write(f"{name} {{os.getpid()}} {{sys.argv!r}}\\n")
"""
TIMES: dict[str, float] = {}


def _step(name: str, started: float) -> None:
    TIMES[name] = time.monotonic() - started
    print(f"test_wheel: {name} {TIMES[name]:.1f} s")


def _never_copied(rel: Path) -> bool:
    return any(part in NEVER_COPIED or part.endswith(".egg-info") for part in rel.parts) \
        or rel.suffix == ".pyc"


def clean_copy(dst: Path) -> list[str]:
    """The working tree's tracked and new (not ignored) files, as they are now, into *dst*."""
    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                       capture_output=True, timeout=60)
    if r.returncode == 0:
        names = sorted({n for n in r.stdout.decode().split("\0") if n})
    else:  # not a git checkout (an unpacked sdist): every file but the generated ones
        names = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file())
    copied = []
    for name in names:
        src, rel = ROOT / name, Path(name)
        if _never_copied(rel) or not src.is_file():  # a tracked file deleted in the working tree
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / rel)
        copied.append(name)
    return copied


def shipped(copied: list[str]) -> set[str]:
    """What the wheel must hold, from the tree: ``pg_job_chaos/``'s modules, and every module and
    ``.sql``/``.html``/``.txt`` file of the layers, and the worker contract's Node files (``.js``,
    the client's ``package.json`` and lockfile; never ``node_modules``), Go files (``.go``, ``go.mod``,
    ``go.sum``) and Java files (``.java``, ``pom.xml``; never ``target``): built where they run, under
    ``pg_job_chaos/``."""
    out = set()
    for name in copied:
        rel = Path(name)
        if "node_modules" in rel.parts or "target" in rel.parts:
            continue
        if rel.suffix not in (".py", ".sql", ".html", ".txt", ".js", ".go", ".java") and rel.name not in (
                "package.json", "package-lock.json", "go.mod", "go.sum", "pom.xml"):
            continue
        if rel.parts[0] == "pg_job_chaos" and len(rel.parts) == 2:
            out.add(name)
        elif rel.parts[0] in pg_job_chaos.LAYERS:
            out.add(f"pg_job_chaos/{name}")
    return out


OUTER_PTH = "zz-pg-job-chaos-test-outer-site.pth"  # read after every .pth of the venv's own


def outer_site_dirs() -> list[str]:
    """The site directories of the interpreter running this test, in its ``sys.path`` order: a
    venv's site-packages (and the base's when that venv has ``--system-site-packages``), or the
    machine interpreter's; the user site when this interpreter reads it."""
    dirs = list(python_site.getsitepackages())
    if python_site.ENABLE_USER_SITE:
        dirs.insert(0, python_site.getusersitepackages())
    order = {p: i for i, p in enumerate(sys.path)}
    return sorted((d for d in dirs if os.path.isdir(d)), key=lambda d: order.get(d, len(order)))


def outer_pth(dirs: list[str]) -> str:
    """A ``.pth`` file that adds *dirs* after the venv's own site-packages, reading their ``.pth``
    files (``site.addsitedir``), as ``--system-site-packages`` adds the base's."""
    return "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)


def _env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_DROPPED}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass
class Installed:
    wheel: Path
    names: list[str]  # the wheel's files
    expected: set[str]  # what the tree says it must hold
    venv: Path
    python: Path
    site: Path  # the venv's site-packages
    project: Path  # the scratch project (cwd of every command)
    env: dict[str, str]

    def run(self, *argv, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                              cwd=self.project, env=self.env, stdin=subprocess.DEVNULL)


def _check_build_requirements() -> None:
    """``--no-build-isolation`` builds with this interpreter's setuptools: pyproject.toml's
    build-system requires (setuptools>=68, wheel), which the test extra installs."""
    try:
        major = int(metadata.version("setuptools").split(".")[0])
        metadata.version("wheel")
    except metadata.PackageNotFoundError as exc:
        pytest.fail(f"building the wheel offline needs {exc.name}: pip install -e '.[test]'")
    if major < 68:
        pytest.fail(f"setuptools {metadata.version('setuptools')} < 68 (pyproject.toml's build-system): "
                    "pip install -e '.[test]'")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    _check_build_requirements()
    base = tmp_path_factory.mktemp("wheel")
    t0 = started = time.monotonic()
    src = base / "src"
    copied = clean_copy(src)
    assert "pyproject.toml" in copied and "workers/body/body.sql" in copied, copied[:20]
    _step("copy", started)

    started = time.monotonic()
    dist = base / "dist"
    # str(src): a path, never a name
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "--no-index", "--disable-pip-version-check", "-w", str(dist), str(src)],
                       capture_output=True, text=True, timeout=300, cwd=base, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = list(dist.glob("*.whl"))
    assert [w.name for w in wheels] == [f"pg_job_chaos-{pg_job_chaos.__version__}-py3-none-any.whl"], wheels
    with zipfile.ZipFile(wheels[0]) as z:
        names = z.namelist()
    _step("build", started)

    started = time.monotonic()
    venv = base / "venv"
    # --without-pip: the outer environment's pip, seen through the .pth file, installs into the venv
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=120, capture_output=True)
    python = venv / "bin" / "python"
    env = _env(venv)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(python), "-c", purelib], capture_output=True, text=True, check=True,
                               env=env).stdout.strip())
    (site / OUTER_PTH).write_text(outer_pth(outer_site_dirs()))
    r = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
                        "--disable-pip-version-check", str(wheels[0])],
                       capture_output=True, text=True, timeout=300, cwd=base, env=env,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (site / "pg_job_chaos" / "workers" / "body" / "body.sql").is_file(), site
    _step("venv and install", started)

    project = base / "project"
    for name in ("workers", "core"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text(SCRATCH_PACKAGE.format(name=name))
    yield Installed(wheels[0], names, shipped(copied), venv, python, site, project, env)
    TIMES["total"] = time.monotonic() - t0
    print("test_wheel: times " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMES.items()))


def test_the_wheel_is_one_name_with_its_data(installed):
    top = {n.split("/")[0] for n in installed.names}
    dist_info = f"pg_job_chaos-{pg_job_chaos.__version__}.dist-info"
    assert top == {"pg_job_chaos", dist_info}, top
    files = {n for n in installed.names if not n.startswith(dist_info + "/")}
    assert "pg_job_chaos/workers/body/body.sql" in files
    assert "pg_job_chaos/harness/report/report.html" in files
    assert "pg_job_chaos/harness/cli/new_design.py.txt" in files
    assert "pg_job_chaos/__main__.py" in files and "pg_job_chaos/harness/janitor.py" in files
    missing, extra = installed.expected - files, files - installed.expected
    assert not missing, f"in the tree, not in the wheel: {sorted(missing)}"
    assert not extra, f"in the wheel, not from the tree's layers: {sorted(extra)}"
    with zipfile.ZipFile(installed.wheel) as z:
        entry_points = z.read(f"{dist_info}/entry_points.txt").decode()
        top_level = z.read(f"{dist_info}/top_level.txt").decode().split() if f"{dist_info}/top_level.txt" in \
            z.namelist() else ["pg_job_chaos"]
    assert "pg-job-chaos = pg_job_chaos.harness.cli.main:main" in entry_points
    assert "pg_job_chaos.plugin = pg_job_chaos.plugin" in entry_points
    assert top_level == ["pg_job_chaos"]


IMPORTS = r"""
import json, sys
import workers, core
import pg_job_chaos, pg_job_chaos.workers, pg_job_chaos.core
from pg_job_chaos.workers import DESIGNS
from pg_job_chaos.harness.cli import main
print(json.dumps({
    "marks": [workers.MARK, core.MARK],
    "scratch": [workers.__file__, core.__file__],
    "pg_job_chaos": pg_job_chaos.__file__,
    "layers": [pg_job_chaos.workers.__file__, pg_job_chaos.core.__file__],
    "designs": sorted(DESIGNS),
    "theirs": sorted(n for n, m in sys.modules.items()
                     if n.partition(".")[0] == "pg_job_chaos" and getattr(m, "__file__", None)
                     and not m.__file__.startswith(sys.argv[1])),
}))
"""


def test_both_workers_packages_in_one_interpreter_from_the_users_project(installed):
    r = installed.run(installed.python, "-c", IMPORTS, installed.site)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["marks"] == ["scratch-workers", "scratch-core"]
    assert all(Path(f).is_relative_to(installed.project) for f in got["scratch"]), got
    # the venv's copy, not the checkout (nor the machine's editable install of it)
    assert Path(got["pg_job_chaos"]) == installed.site / "pg_job_chaos" / "__init__.py", got
    assert [Path(f) for f in got["layers"]] == [installed.site / "pg_job_chaos" / x / "__init__.py"
                                                for x in ("workers", "core")], got
    assert not Path(got["pg_job_chaos"]).is_relative_to(ROOT)
    assert got["theirs"] == [], f"modules of pg_job_chaos from outside the venv: {got['theirs']}"
    assert "lease" in got["designs"]


def test_the_venv_sees_this_environments_packages_after_its_own(installed):
    """psycopg (and pytest) as the running interpreter has them, a venv's or the machine's; the
    venv's own site-packages first on ``sys.path``."""
    import psycopg

    r = installed.run(installed.python, "-c", "import json, sys, psycopg, pytest; "
                      "print(json.dumps([psycopg.__file__, pytest.__file__, sys.path]))")
    assert r.returncode == 0, r.stderr
    theirs, their_pytest, path = json.loads(r.stdout)
    assert (theirs, their_pytest) == (psycopg.__file__, pytest.__file__)
    outer = outer_site_dirs()
    assert path.index(str(installed.site)) < min(path.index(d) for d in outer), path


def test_console_script_and_python_m(installed):
    script = installed.venv / "bin" / "pg-job-chaos"
    assert script.is_file() and str(installed.python) in script.read_text().splitlines()[0]
    r = installed.run(script, "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: pg-job-chaos "), r.stdout + r.stderr
    r = installed.run(script, "--version")
    assert r.returncode == 0 and r.stdout == f"pg-job-chaos {pg_job_chaos.__version__}\n", r.stdout + r.stderr
    r = installed.run(script, "--list-faults")
    assert r.returncode == 0 and "crash" in r.stdout and "partition" in r.stdout, r.stdout + r.stderr
    written = installed.project / "wheel_queue.py"
    written.unlink(missing_ok=True)
    r = installed.run(script, "new-design", "wheel_queue")  # its template, from the wheel's package data
    assert r.returncode == 0 and "class WheelQueue(hosted.HostedDesign):" in written.read_text(), r.stderr
    written.unlink()
    r = installed.run(installed.python, "-m", "pg_job_chaos", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: pg-job-chaos "), r.stdout + r.stderr
    r = installed.run(installed.python, "-m", "pg_job_chaos", "--design", "nope")
    assert r.returncode == 2 and r.stderr.startswith("pg-job-chaos: ") and "Traceback" not in r.stderr


PLUGIN_TEST = """
import workers, core
import pg_job_chaos


def test_the_plugin_loads_from_the_wheel(pytestconfig):
    plugin = pytestconfig.pluginmanager.get_plugin("pg_job_chaos.plugin")
    assert plugin is not None and plugin.__file__ == {plugin!r}, plugin
    assert pg_job_chaos.__file__ == {package!r}
    assert pytestconfig.getoption("chaos_examples") == 3
    assert any(m.startswith("chaos_config") for m in pytestconfig.getini("markers"))
    assert (workers.MARK, core.MARK) == ("scratch-workers", "scratch-core")
"""


def test_the_pytest_plugin_loads_in_the_users_project(installed):
    r = installed.run(installed.python, "-m", "pytest", "--help", "-p", "no:cacheprovider")
    assert r.returncode == 0 and "--chaos-examples" in r.stdout, r.stdout[-2000:] + r.stderr
    (installed.project / "test_uses_plugin.py").write_text(PLUGIN_TEST.format(
        plugin=str(installed.site / "pg_job_chaos" / "plugin.py"),
        package=str(installed.site / "pg_job_chaos" / "__init__.py")))
    try:
        r = installed.run(installed.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--chaos-examples", "3", "test_uses_plugin.py")
    finally:
        (installed.project / "test_uses_plugin.py").unlink()
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr


def test_a_search_runs_from_the_wheel(installed):
    """Supervisor, workers, janitor and SQL files from the wheel; the project's ``core`` and
    ``workers`` (on the janitor's ``sys.path``: ``python -m`` puts the cwd first) never imported."""
    log = installed.project / "imported.log"
    log.unlink(missing_ok=True)
    started = time.monotonic()
    out = installed.project / "result.json"
    r = installed.run(installed.venv / "bin" / "pg-job-chaos", "--design", "lease", "--faults", "crash",
                      "--examples", "1", "--time-scale", "0.2", "--seed", "1", "-q", "--json", out,
                      "--example-db", installed.project / "examples-db", timeout=300)
    _step("search", started)
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr
    result = json.loads(out.read_text())
    # the wheel judges with every property of the tree that applies (no failover's without a replica,
    # no fairness without a workload)
    assert list(result["properties"]) == applying(replica=False, workload=False)
    assert not set(REPLICA_ONLY) & set(result["properties"])
    assert "starvation-bound" not in result["properties"]
    assert all(p["status"] in ("held", "violated", "unknown") for p in result["properties"].values())
    assert (r.returncode == 1) == result["failed"], result
    if result["failed"]:  # a counterexample saved under the project's chaos-out/
        assert list((installed.project / "chaos-out").glob("*.json")), r.stdout[-2000:]
    assert not log.exists(), f"the harness imported the project's own packages:\n{log.read_text()}"


def test_the_copy_leaves_generated_files_out(tmp_path):
    assert _never_copied(Path("build/lib/x.py")) and _never_copied(Path("pg_job_chaos.egg-info/PKG-INFO"))
    assert _never_copied(Path("harness/__pycache__/a.cpython-311.pyc")) \
        and _never_copied(Path("chaos-out/s.json"))
    assert not _never_copied(Path("harness/report/report.html"))
    assert shipped(["workers/body/body.sql", "pg_job_chaos/plugin.py", "tests/conftest.py", "README.md",
                    "harness/report/report.html"]) == {
        "pg_job_chaos/workers/body/body.sql", "pg_job_chaos/plugin.py",
        "pg_job_chaos/harness/report/report.html"}
