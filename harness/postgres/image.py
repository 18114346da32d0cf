"""A small local PostgreSQL image built from the binaries the harness already uses (no registry).

``build(client, binaries, tag)`` makes a ``FROM scratch`` image: the installation (``bin``, ``lib``,
``share``) under ``/usr/local/pgsql``; every host library ``ldd`` names for its programs (the wheel
bundles its own libraries but still needs the host's glibc and loader); ``/bin/sh`` (initdb runs
``postgres`` through it) with its libraries; the host's time-zone data; a ``postgres`` user; an
entrypoint of its own (:data:`ENTRYPOINT`); and ``VOLUME`` on the data directory, so removing a
container must remove its volume too (``v=True``). It speaks the official image's interface:
``POSTGRES_PASSWORD``, user ``postgres``, ``postgres -c ...`` as the command.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from ...core.errors import HarnessError
from .binaries import Binaries

PREFIX = "/usr/local/pgsql"
UID = GID = 999
# The entrypoint: initdb on an empty volume (password from POSTGRES_PASSWORD, SCRAM from anywhere:
# a published port arrives from the bridge's gateway), then the server. Only shell builtins: the
# image has no coreutils.
ENTRYPOINT = """#!/bin/sh
set -e
if [ "$1" = postgres ]; then shift; fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    echo "$POSTGRES_PASSWORD" | initdb -D "$PGDATA" -U postgres --pwfile=/dev/stdin --auth=scram-sha-256 \\
        --no-locale -E UTF8 --no-sync
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" -c unix_socket_directories=/tmp -c listen_addresses='*' "$@"
"""
DOCKERFILE = f"""FROM scratch
COPY rootfs/ /
COPY --chown={UID}:{GID} data/ /var/lib/postgresql/data/
ENV PATH={PREFIX}/bin PGDATA=/var/lib/postgresql/data TZ=UTC LANG=C
USER {UID}:{GID}
VOLUME /var/lib/postgresql/data
EXPOSE 5432
ENTRYPOINT ["/bin/sh", "/entrypoint.sh"]
CMD ["postgres"]
"""


def _libraries(programs: list[Path]) -> set[Path]:
    """Absolute paths of the shared objects ``ldd`` names for *programs* (and the loader)."""
    found: set[Path] = set()
    for p in programs:
        out = subprocess.run(["ldd", str(p)], capture_output=True, text=True, timeout=30).stdout
        for m in re.finditer(r"(?:=>\s*)?(/\S+)\s+\(0x", out):
            found.add(Path(m.group(1)))
    return found


def _copy_into(root: Path, path: Path) -> None:
    """*path* at the same place under *root*, symlinks resolved (the image has no other copy)."""
    dest = root / path.relative_to("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path.resolve(), dest)


def context(bins: Binaries, into: Path) -> Path:
    """Write the build context for *bins* into *into*; returns it."""
    install = bins.bindir.parent
    rootfs = into / "rootfs"
    for part in ("bin", "lib", "share"):
        if (install / part).exists():
            shutil.copytree(install / part, rootfs / PREFIX.lstrip("/") / part, symlinks=True)
    sh = Path("/bin/sh")
    programs = [bins.bindir / "postgres", bins.bindir / "initdb", sh.resolve()]
    programs += [p for p in (install / "lib").glob("*.so*") if p.is_file()]
    for lib in _libraries(programs):
        if not str(lib).startswith(str(install)) and lib.exists():
            _copy_into(rootfs, lib)
    _copy_into(rootfs, sh)
    if Path("/usr/share/zoneinfo").is_dir():
        shutil.copytree("/usr/share/zoneinfo", rootfs / "usr/share/zoneinfo", symlinks=True)
    (rootfs / "etc").mkdir(exist_ok=True)
    (rootfs / "etc/passwd").write_text(f"root:x:0:0::/:/bin/sh\n"
                                       f"postgres:x:{UID}:{GID}::/var/lib/postgresql:/bin/sh\n")
    (rootfs / "etc/group").write_text(f"root:x:0:\npostgres:x:{GID}:\n")
    (rootfs / "tmp").mkdir()
    os.chmod(rootfs / "tmp", 0o1777)
    (rootfs / "entrypoint.sh").write_text(ENTRYPOINT)
    (into / "data").mkdir()
    os.chmod(into / "data", 0o700)
    (into / "Dockerfile").write_text(DOCKERFILE)
    return into


def build(client, bins: Binaries, tag: str) -> str:
    """Build the image *tag* from *bins* with the engine *client*; :class:`HarnessError` on failure."""
    with tempfile.TemporaryDirectory(prefix="pgjc-image-") as tmp:
        ctx = context(bins, Path(tmp))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(ctx, arcname=".")
        buf.seek(0)
        try:
            client.images.build(fileobj=buf, custom_context=True, tag=tag, rm=True, forcerm=True,
                                labels={"pg-job-chaos": "1"})
        except Exception as exc:
            raise HarnessError(f"could not build the image {tag}: {exc}") from None
    return tag
