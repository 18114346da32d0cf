"""Each version of a system installed beside the pinned one, never over it, and cached.

A Python library's version gets a virtual environment under :data:`CACHE` holding that version (and
what it depends on, at the versions pip resolves for it), with one ``.pth`` line that adds the pinned
environment's ``site-packages`` *after* its own: the harness and its dependencies are the running ones,
the library and its dependencies the venv's (a package found in the venv shadows the pinned one of the
same name). The harness runs in it as ``<venv>/bin/python -m pg_job_chaos``. A Node library's version
gets an npm prefix whose ``node_modules`` the contract client looks in first (``PGJC_NODE_MODULES``).

A version the harness already runs (the pinned one) needs nothing: :func:`locate` says so.

Hazards: an environment is built in a ``.partial-*`` folder and renamed into place only once it works,
so an interrupted build leaves nothing half-built (the folder is removed; a killed build's is removed by
the next :func:`prepare`). The layered venv depends on the pinned environment staying where it was:
its marker records that path, and a venv whose pinned environment moved is rebuilt.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...core.procs import alive
from .systems import System, refusal

__all__ = ["CACHE", "Env", "Prepared", "locate", "prepare"]

CACHE = Path(os.environ.get("PGJC_CORPUS_CACHE")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pg-job-chaos" / "corpus")
MARKER = "pgjc-corpus.json"  # written last, inside the folder, before it is renamed into place
INSTALL_TIMEOUT = 900.0  # seconds for one pip or npm install (a cold cache on a slow link)
NODE_CLIENTS = Path(__file__).resolve().parents[2] / "workers" / "clients" / "node" / "node_modules"


@dataclass(frozen=True)
class Env:
    """Where one version runs: ``python`` the interpreter that runs the harness with it, and for a Node
    library ``node_modules`` (None: the pinned one); ``pinned`` when it is the harness's own."""

    system: str
    version: str
    python: str
    node_modules: Path | None = None
    pinned: bool = False
    path: Path | None = None  # the cached folder (None: the pinned environment)

    def environment(self) -> dict[str, str]:
        """The environment a harness process runs this version in."""
        env = dict(os.environ)
        if self.node_modules is not None:
            env["PGJC_NODE_MODULES"] = str(self.node_modules)
        return env

    @property
    def label(self) -> str:
        return "pinned" if self.pinned else str(self.path)


@dataclass(frozen=True)
class Prepared:
    """:func:`prepare`'s answer: the :class:`Env`, or why the version was refused, and the seconds spent."""

    env: Env | None
    refused: str | None = None
    seconds: float = 0.0
    built: bool = False  # False: it was there already (cached or pinned)


def _pinned_version(system: System) -> str | None:
    if system.installer == "pip":
        try:
            return importlib.metadata.version(system.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None
    try:
        return json.loads((NODE_CLIENTS / system.distribution / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def _folder(system: System, version: str) -> Path:
    runtime = f"py{sys.version_info.major}.{sys.version_info.minor}" if system.installer == "pip" else "node"
    return CACHE / f"{system.name}-{version}-{runtime}"


def _pinned_sites() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys((paths["purelib"], paths["platlib"])))


def locate(system: System, version: str) -> Env | None:
    """The environment *version* of *system* runs in, if it is ready (the pinned one, or one
    :func:`prepare` built); None when it must be prepared first."""
    if _pinned_version(system) == version:
        return Env(system.name, version, sys.executable, pinned=True)
    folder = _folder(system, version)
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if system.installer == "npm":
        return Env(system.name, version, sys.executable, node_modules=folder / "node_modules", path=folder)
    if marker.get("pinned_sites") != _pinned_sites():
        return None  # the pinned environment it layers on moved: rebuild
    return Env(system.name, version, str(folder / "bin" / "python"), path=folder)


def prepare(system: System, version: str, progress: Callable[[str], None] = lambda s: None) -> Prepared:
    """Make *version* of *system* ready to run (built once, then cached); refused with the reason when it
    cannot be installed here (the system's known needs, or the installer's own error)."""
    t0 = time.monotonic()
    found = locate(system, version)
    if found is not None:
        return Prepared(found, seconds=time.monotonic() - t0)
    why = refusal(system, version)
    if why is not None:
        return Prepared(None, refused=why, seconds=time.monotonic() - t0)
    CACHE.mkdir(parents=True, exist_ok=True)
    _remove_abandoned()
    folder = _folder(system, version)
    partial = CACHE / f".partial-{folder.name}-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    progress(f"preparing {system.name} {version} in {folder}")
    try:
        why = (_build_pip if system.installer == "pip" else _build_npm)(system, version, partial)
        if why is not None:
            return Prepared(None, refused=why, seconds=time.monotonic() - t0)
        (partial / MARKER).write_text(json.dumps({
            "system": system.name, "version": version, "requirement": system.requirement_for(version),
            "pinned_sites": _pinned_sites(), "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
        try:
            shutil.rmtree(folder, ignore_errors=True)  # a stale one (its pinned environment moved)
            partial.rename(folder)
        except OSError:  # another prepare put it there first: keep theirs
            pass
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    env = locate(system, version)
    if env is None:
        return Prepared(None, refused=f"built in {folder}, but it does not answer as ready",
                        seconds=time.monotonic() - t0)
    return Prepared(env, seconds=time.monotonic() - t0, built=True)


def _remove_abandoned() -> None:
    """Partial builds whose process is gone (killed mid-build)."""
    for p in CACHE.glob(".partial-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _run(cmd: list[str], **kwargs) -> str | None:
    """Run an installer; None when it succeeded, else the last lines of what it said."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False,
                           **kwargs)
    except subprocess.TimeoutExpired:
        return f"{cmd[0]} took longer than {INSTALL_TIMEOUT:g} s"
    except FileNotFoundError as exc:
        return f"cannot run {cmd[0]}: {exc.strerror}"
    if p.returncode == 0:
        return None
    said = [line.strip() for line in (p.stderr or p.stdout).splitlines() if line.strip()]
    return " / ".join(said[-3:]) or f"exit {p.returncode}"


def _build_pip(system: System, version: str, partial: Path) -> str | None:
    base = getattr(sys, "_base_executable", sys.executable)
    why = _run([base, "-m", "venv", str(partial)])
    if why is not None:
        return f"python -m venv: {why}"
    python = str(partial / "bin" / "python")
    # Installed before the .pth exists: pip must see only the venv, never uninstall the pinned one.
    why = _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                system.requirement_for(version)])
    if why is not None:
        return f"pip install {system.requirement_for(version)}: {why}"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # site.addsitedir appends (the venv's own packages stay first) and runs the pinned environment's
    # own .pth files (an editable install of the harness is one).
    lines = [f"import site; site.addsitedir({p!r})" for p in _pinned_sites()]
    (Path(site) / "pgjc_pinned.pth").write_text("\n".join(lines) + "\n")
    check = (f"import importlib.metadata as m, pg_job_chaos; "
             f"v = m.version({system.distribution!r}); print(v); assert v == {version!r}, v")
    why = _run([python, "-c", check])
    return None if why is None else f"the venv does not run the harness with {system.name} {version}: {why}"


def _build_npm(system: System, version: str, partial: Path) -> str | None:
    npm = shutil.which("npm")
    if npm is None:
        return "no npm on PATH"
    partial.mkdir(parents=True)
    why = _run([npm, "install", "--prefix", str(partial), "--no-audit", "--no-fund", "--silent",
                system.requirement_for(version)])
    return None if why is None else f"npm install {system.requirement_for(version)}: {why}"
