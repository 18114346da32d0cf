"""Progress on stderr: a bar on a terminal, the plain lines of old everywhere else."""

from __future__ import annotations

import io
import os

from pg_job_chaos.harness.progress import Progress, finish, step


def test_plain_lines_when_the_stream_is_not_a_terminal():
    buf = io.StringIO()
    with Progress(buf) as p:
        p("PostgreSQL: local")
        step(p, "example 1: all held", done=1, total=3)
    assert buf.getvalue() == "  PostgreSQL: local\n  example 1: all held\n"


def test_a_bar_on_a_terminal_counts_done_of_total():
    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as tty, Progress(tty) as p:
            assert p._bar is not None  # chosen because the stream is a terminal
        buf = io.StringIO()
        with Progress(buf, bar=True) as p:
            p("PostgreSQL: local")
            step(p, "example 3: all held", done=3, total=10)
            finish(p)
            p("after the bar: a plain line")
        out = buf.getvalue()
        assert "PostgreSQL: local" in out and "example 3: all held" in out and "3/10" in out
        assert out.endswith("  after the bar: a plain line\n")
    finally:
        os.close(master)
        os.close(slave)


def test_quiet_prints_nothing_and_other_callables_get_the_text():
    buf = io.StringIO()
    with Progress(buf, quiet=True, bar=True) as p:
        step(p, "example 1", done=1, total=2)
        p("anything")
    assert buf.getvalue() == ""
    seen = []
    step(seen.append, "example 1", done=1, total=2)
    assert seen == ["example 1"]


def test_the_first_time_copy_of_the_server_reports_its_files(tmp_path, monkeypatch):
    from pg_job_chaos.harness.postgres import binaries

    src = tmp_path / "pg"
    for part, n in (("bin", 3), ("lib", 250), ("share", 2)):
        (src / part).mkdir(parents=True)
        for i in range(n):
            (src / part / f"f{i}").write_text("x")
    monkeypatch.setattr(binaries, "CACHE_DIR", tmp_path / "cache")
    calls = iter([False, True])  # the user cannot run the original; it can run the copy
    monkeypatch.setattr(binaries, "runnable_by", lambda user, path: next(calls))
    buf = io.StringIO()
    with Progress(buf) as p:
        copy = binaries.reachable_copy(binaries.Binaries(src / "bin", "test", "17.10"), "postgres", p)
    assert (copy.bindir / "f0").is_file()
    assert buf.getvalue().splitlines() == [
        f"  copying PostgreSQL 17.10 for user postgres (once): {n}/255 files" for n in (100, 200, 255)]
