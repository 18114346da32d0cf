"""Headless Chromium for tests: load a local file with no network, dump its DOM, take a screenshot.

The browser runs in a network namespace of its own (``unshare -n``: no interface but loopback, so
the page cannot fetch anything and the browser cannot phone home), with ``--no-sandbox`` (tests run
as root, where Chromium's sandbox refuses to start) and background networking off.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT = 120.0  # seconds one browser launch may take before the test fails instead of hanging
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--enable-logging=stderr", "--v=0")


@dataclass
class Loaded:
    dom: str
    console: list[str]  # the page's console lines (script errors appear as "Uncaught ...")


def unavailable() -> str | None:
    """Why no browser can run here (a skip reason), or None."""
    exe = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if exe is None:
        return "no Chromium installed (apt-get install -y chromium; .ci/run does it)"
    if shutil.which("unshare") is None:
        return "no unshare(1): cannot give the browser a network namespace of its own"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"unshare -n is not allowed here ({probe.stderr.strip() or probe.returncode}); needs root"
    return None


def _run(page: Path, profile: Path, *extra: str, fragment: str = "") -> subprocess.CompletedProcess:
    exe = next(shutil.which(b) for b in BROWSERS if shutil.which(b))
    url = page.resolve().as_uri() + fragment
    cmd = ["unshare", "-n", exe, *FLAGS, f"--user-data-dir={profile}", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def load(page: Path, profile: Path) -> Loaded:
    """The DOM after the page's scripts ran, and its console lines."""
    r = _run(page, profile, "--dump-dom")
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    return Loaded(r.stdout, console)


def screenshot(page: Path, png: Path, profile: Path, *, size: tuple[int, int] = (1280, 1600),
               fragment: str = "#top") -> Path:
    """A PNG of the page from its top (*fragment* ``#top``: a report page then does not scroll to its
    counterexample's event, which a screenshot would catch half painted)."""
    r = _run(page, profile, f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", "--hide-scrollbars",
             fragment=fragment)
    if not png.is_file():
        raise AssertionError(f"no screenshot written (exit {r.returncode}): {r.stderr[-2000:]}")
    return png
