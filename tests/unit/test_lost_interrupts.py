"""A Ctrl-C or SIGTERM whose exception Python drops is delivered again (harness/cli/interrupts.py,
``not_lost``). A signal's handler runs at the main thread's next bytecode; inside a
garbage-collector callback (Hypothesis installs one) its KeyboardInterrupt is only printed, "Exception
ignored in ...", and a search went on to its end instead of stopping. Here a gc callback raises the
handler's exception once, as the handler would there, in a child process (its own signals)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

CHILD = r"""
import gc, signal, sys, time
from pg_job_chaos.harness.cli.interrupts import Terminated, not_lost, terminated

signal.signal(signal.SIGTERM, terminated)
# Hazard: a child of a shell's background job (`.ci/run &`) inherits SIGINT ignored, and Python then
# installs no handler of its own: the interrupt sent again would be ignored too
signal.signal(signal.SIGINT, signal.default_int_handler)
kind, guarded = sys.argv[1], sys.argv[2] == "guarded"
raised = []


def callback(phase, info):  # where the handler ran: what it raises here is dropped
    if not raised:
        raised.append(phase)
        raise KeyboardInterrupt() if kind == "SIGINT" else Terminated(signal.SIGTERM)


gc.callbacks.append(callback)
started = time.monotonic()
try:
    if guarded:
        with not_lost():
            gc.collect()
            time.sleep(60)  # a blocking call: the signal sent again ends it
    else:
        gc.collect()
        time.sleep(1)
    print("lost")
except Terminated as exc:
    print(f"Terminated {exc.signum} after {time.monotonic() - started:.1f} s")
except KeyboardInterrupt:
    print(f"KeyboardInterrupt after {time.monotonic() - started:.1f} s")
"""


def _child(kind: str, guarded: bool) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, kind, "guarded" if guarded else "bare"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_an_interrupt_raised_in_a_gc_callback_is_lost_without_it():
    r = _child("SIGINT", guarded=False)
    assert r.stdout.strip() == "lost", r.stdout + r.stderr
    assert "Exception ignored" in r.stderr and "KeyboardInterrupt" in r.stderr


@pytest.mark.parametrize(("kind", "expected"), [("SIGINT", "KeyboardInterrupt"),
                                                ("SIGTERM", "Terminated 15")])
def test_a_lost_interrupt_is_delivered_again(kind, expected):
    r = _child(kind, guarded=True)
    said, _, after = r.stdout.strip().rpartition(" after ")
    assert said == expected, r.stdout + r.stderr
    assert float(after.split()[0]) < 30, r.stdout  # the sleep (60 s) was cut short
    assert "Exception ignored" not in r.stderr, r.stderr
