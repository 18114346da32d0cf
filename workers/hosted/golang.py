"""The worker contract's Go client (``workers/clients/go``, a Go module): its commands, built once and
cached.

:func:`command` builds one of the module's commands (``cmd/reference``, ``cmd/river``) with the
machine's ``go`` and returns the binary. A binary is kept under the user's cache directory
(``$XDG_CACHE_HOME`` or ``~/.cache``, ``pg-job-chaos/go/``) by a digest of the module's sources, so a
test session or a second run builds nothing, and an edited source builds anew. It is written under
a temporary name and renamed into place, so parallel test workers never run a half-written one.
The module's dependencies come from the Go module proxy into the Go module cache (``.ci/run``
downloads them first: ``go mod download``).
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

MODULE = Path(__file__).parent.parent / "clients" / "go"
NEED = (1, 26)  # go.mod's go line: an older go would fetch a toolchain, which the machine may not reach
BUILD_TIMEOUT = 600.0  # seconds: a fresh machine compiles pgx and River once


def missing() -> str | None:
    """Why the Go client cannot be built here, or None."""
    go = shutil.which("go")
    if go is None:
        return "no go on PATH (the Go client needs Go >= 1.26)"
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False).stdout
    m = re.match(r"go(\d+)\.(\d+)", out.strip())
    if m is None or (int(m[1]), int(m[2])) < NEED:
        return f"{out.strip() or 'an unknown go'} on PATH: the Go client needs Go >= {NEED[0]}.{NEED[1]}"
    return None


def _digest() -> str:
    h = hashlib.sha256()
    for p in sorted(MODULE.rglob("*")):
        if p.is_file() and (p.suffix in (".go", ".sql") or p.name in ("go.mod", "go.sum")):
            h.update(str(p.relative_to(MODULE)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pg-job-chaos" / "go"


def command(name: str) -> Path:
    """The binary of the module's ``cmd/<name>``, built now unless a build of these sources is cached.
    A :class:`UsageError` names what is missing (no go) or how the build failed."""
    why = missing()
    if why:
        raise UsageError(why)
    out = cache_dir() / _digest() / name
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out.parent)
    os.close(fd)
    try:
        p = subprocess.run(["go", "build", "-trimpath", "-o", tmp, f"./cmd/{name}"], cwd=MODULE,
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
        if p.returncode != 0:
            tail = " | ".join((p.stderr or p.stdout).strip().splitlines()[-5:])
            raise UsageError(f"go build ./cmd/{name} (in {MODULE}) failed: {tail}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
