"""The worker contract's Java client (``workers/clients/java``, a Maven module): one runnable jar, built
once and cached.

:func:`command` returns the words that run one of the jar's commands (``reference``, ``db-scheduler``:
``pgjc.Main``): the machine's ``java`` with :data:`JVM_OPTIONS`, ``-jar`` and the jar. The jar is built by
the machine's ``mvn`` (``package``: the shade plugin bundles the dependencies) into a temporary directory
and kept under the user's cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``, ``pg-job-chaos/jvm/``) by a
digest of the module's sources, so a test session or a second run builds nothing and an edited source
builds anew; it is renamed into place, so parallel test workers never run a half-written one. Maven's
artifacts come from Maven Central into its local repository (``~/.m2``, kept between runs: ``.ci/run``
resolves them first); the build runs offline (``-o``) and goes online only when that fails.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ...core.errors import UsageError

MODULE = Path(__file__).parent.parent / "clients" / "java"
NEED = 17  # pom.xml's maven.compiler.release
BUILD_TIMEOUT = 600.0  # seconds: a fresh machine resolves db-scheduler, PgJDBC, HikariCP and Jackson once
# A small JVM: the serial collector and the client compiler only (quick to start, light on a 2-core
# machine with several workers), a bounded heap; no perf-data file (/tmp/hsperfdata_<user>/<pid>, which a
# JVM killed by a fault leaves behind: harness/supervisor/leftovers.py).
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-XX:-UsePerfData")


def java_version(java: str) -> int | None:
    """The feature version of *java* (17 for ``openjdk version "17.0.15"``), or None."""
    p = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', p.stderr + p.stdout)
    if m is None:
        return None
    major = int(m[1])
    return int(m[2] or 0) if major == 1 else major  # 1.8 is 8


def missing() -> str | None:
    """Why the Java client cannot be built or run here, or None."""
    java = shutil.which("java")
    if java is None:
        return f"no java on PATH (the Java client needs a JDK >= {NEED} and Maven)"
    version = java_version(java)
    if version is None or version < NEED:
        return f"java {version or 'of an unknown version'} on PATH: the Java client needs a JDK >= {NEED}"
    if shutil.which("mvn") is None:
        return "no mvn on PATH (Maven builds the Java client)"
    return None


def _digest() -> str:
    h = hashlib.sha256()
    files = [MODULE / "pom.xml", *sorted((MODULE / "src").rglob("*"))]
    for p in files:
        if p.is_file():
            h.update(str(p.relative_to(MODULE)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pg-job-chaos" / "jvm"


def jar() -> Path:
    """The module's jar, built now unless a build of these sources is cached. A :class:`UsageError`
    names what is missing (no java, no mvn) or how the build failed."""
    why = missing()
    if why:
        raise UsageError(why)
    out = cache_dir() / _digest() / "pgjc.jar"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    build = tempfile.mkdtemp(prefix=".build.", dir=out.parent)
    try:
        base = ["mvn", "-q", "-B", f"-Dpgjc.target={build}", "package"]
        p = None
        for offline in (True, False):  # the local repository first; Maven Central only when it lacks one
            words = base[:3] + ["-o"] * offline + base[3:]
            p = subprocess.run(words, cwd=MODULE, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                               check=False)
            if p.returncode == 0:
                break
        assert p is not None
        if p.returncode != 0:
            tail = " | ".join(ln for ln in (p.stdout + p.stderr).strip().splitlines() if "ERROR" in ln)[-600:]
            raise UsageError(f"mvn package (in {MODULE}) failed: {tail}")
        os.replace(Path(build) / "pgjc.jar", out)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return out


def command(name: str, *args: str) -> tuple[str, ...]:
    """The words that run the jar's command *name* (``reference QUEUE.sql``, ``db-scheduler``); the
    harness appends the subcommand."""
    path = jar()
    return (shutil.which("java") or "java", *JVM_OPTIONS, "-jar", str(path), name, *args)
