"""The worker-exit reasons (``core/events.py``'s :class:`WorkerExitReason`): their names, the old name a
saved history may hold, how the supervisor names an exit code, what a worker's log ended with, and what
the properties and the timeline say of a worker that stopped by itself -- no database, no fork."""

from __future__ import annotations

import json
import logging

import pytest

from pg_job_chaos.core import logs
from pg_job_chaos.core.errors import UsageError
from pg_job_chaos.core.events import OLD_EXIT_NAMES, WorkerExitReason, exit_outcome
from pg_job_chaos.core.execlog import ExecLog, path_for
from pg_job_chaos.core.history import History, WorkerExit
from pg_job_chaos.core.schedule import JobSpec, Schedule
from pg_job_chaos.harness.report.text import timeline
from pg_job_chaos.harness.supervisor import process
from pg_job_chaos.properties import HELD, VIOLATED, check
from pg_job_chaos.workers import DesignHandle
from pg_job_chaos.workers.body.context import WorkerContext
from pg_job_chaos.workers.body.execution import WorkerSpec
from pg_job_chaos.workers.builtin.lease import Lease
from tests.unit.test_properties import budget_exit, died, execution, job, one, sane

STOPPED = WorkerExitReason.STOPPED_BY_ITSELF


def stopped(worker: str, t: float = 2.5, *, job_: int | None = None, detail: str | None = "listener failed",
            warning: str | None = None) -> WorkerExit:
    return WorkerExit(worker, pid=101, t=t, outcome=STOPPED, code=process.EXIT_STOPPED_BY_ITSELF, job=job_,
                      detail=detail, last_warning=warning)


# --- the names ----------------------------------------------------------------------------------------
def test_the_reasons_and_which_the_harness_asked_for():
    assert [r.value for r in WorkerExitReason] == ["budget", "stopped-by-itself", "graceful",
                                                   "killed-after-grace"]
    assert {r for r in WorkerExitReason if not r.asked} == {STOPPED}


def test_an_old_name_reads_as_todays_and_a_misspelt_reason_fails():
    assert OLD_EXIT_NAMES == {"drained": WorkerExitReason.BUDGET}
    assert exit_outcome("drained") is WorkerExitReason.BUDGET
    assert exit_outcome("stopped-by-itself") is STOPPED
    for other in ("exit 1", "killed by SIGKILL", "worker error", "abandoned after max runtime", "exit 79"):
        assert exit_outcome(other) == other  # an exit status, a design's own name: as it is
    for bad, meant in (("budgte", "budget"), ("stoped-by-itself", "stopped-by-itself"),
                       ("gracefull", "graceful")):
        with pytest.raises(ValueError, match=f"{bad!r} is not a worker-exit reason: {meant!r} misspelt"):
            exit_outcome(bad)
    with pytest.raises(ValueError, match="'budgte' is not a worker-exit reason"):
        WorkerExit("w1.0", 100, 1.0, "budgte")


def test_a_saved_history_of_drained_workers_reads_as_budget_and_saves_as_it():
    h = sane()
    saved = json.loads(h.to_json())
    assert saved["exits"][0]["outcome"] == "budget"
    saved["exits"][0]["outcome"] = "drained"  # as a run saved before the reasons were defined
    for key in ("detail", "last_warning"):
        del saved["exits"][0][key]  # nor did it have these
    old = History.from_dict(saved)
    assert old.exits[0].outcome is WorkerExitReason.BUDGET and not old.exits[0].died
    assert json.loads(old.to_json())["exits"][0]["outcome"] == "budget"
    assert {k: r.status for k, r in check(old).items()} == {k: r.status for k, r in check(h).items()}


def test_who_died():
    assert died("w1.0", 1).died and stopped("w1.1").died
    assert not budget_exit("w1.0").died
    assert not died("w1.0", 1, outcome="killed by SIGKILL", by_harness=True).died  # the run's end
    for asked in (WorkerExitReason.GRACEFUL, WorkerExitReason.KILLED_AFTER_GRACE):
        assert not WorkerExit("w1.0", 100, 1.0, asked).died


def test_an_exit_in_words():
    assert stopped("w2.0").told() == "stopped by itself: listener failed"
    assert stopped("w2.0", detail="Stop requested", warning="Side task listener failed").told() == \
        "stopped by itself: Stop requested (last warning: Side task listener failed)"
    assert stopped("w2.0", detail=None).told() == "stopped by itself (its log is empty)"
    assert died("w1.0", 1).told() == "exit 1" and budget_exit("w1.0").told() == "budget"


# --- the supervisor's codes -------------------------------------------------------------------------------
def test_the_exit_codes_name_the_reasons_and_a_design_cannot_rename_them():
    assert process.classify(process.EXIT_BUDGET) is WorkerExitReason.BUDGET
    assert process.classify(process.EXIT_STOPPED_BY_ITSELF) is STOPPED
    assert process.classify(process.EXIT_STOPPED_BY_ITSELF, {79: "mine"}) is STOPPED
    assert process.EXIT_CODES == {WorkerExitReason.BUDGET: 0, STOPPED: 79, WorkerExitReason.GRACEFUL: 80}
    assert process.classify(process.EXIT_GRACEFUL, {80: "mine"}) is WorkerExitReason.GRACEFUL
    assert process.classify(-9) == "killed by SIGKILL" and process.classify(1) == "exit 1"


def test_a_design_may_not_name_its_own_exit_code_after_a_reason():
    for name in ("budget", "stopped-by-itself", "drained", "gracefull"):
        mine = type("Mine", (Lease,), {"exit_outcomes": {75: name}})
        with pytest.raises(UsageError, match=f"exit_outcomes names code 75 {name!r}, a worker-exit reason"):
            DesignHandle.of(mine(), "mine")
    ok = type("Mine", (Lease,), {"exit_outcomes": {75: "abandoned after max runtime"}})
    assert DesignHandle.of(ok(), "mine").exit_outcomes == {75: "abandoned after max runtime"}


# --- what the worker's log ended with ---------------------------------------------------------------------
def _worker_log(run_dir, lines: list[tuple[int, str]], *, torn: bytes = b"") -> None:
    handler = logs.WorkerFileHandler(logs.path_for(run_dir, "w2.0"), "w2.0")
    for level, msg in lines:
        handler.emit(logging.makeLogRecord({"name": "lib", "levelno": level, "msg": msg}))
    handler.close()
    with open(logs.path_for(run_dir, "w2.0"), "ab") as f:
        f.write(torn)


def test_last_lines_the_last_message_and_the_last_warning(tmp_path):
    assert logs.last_lines(tmp_path, "w2.0") == (None, None)  # no log at all
    _worker_log(tmp_path, [(logging.INFO, "started"),
                           (logging.ERROR, "Side task listener failed\nTraceback ..."),
                           (logging.INFO, "Stop requested")], torn=b'{"t": 1.0, "lev')
    assert logs.last_lines(tmp_path, "w2.0") == ("Stop requested", "Side task listener failed")


def test_last_lines_no_second_line_when_the_warning_is_the_last(tmp_path):
    _worker_log(tmp_path, [(logging.WARNING, "old warning"), (logging.ERROR, "x" * 1000)])
    assert logs.last_lines(tmp_path, "w2.0") == ("x" * logs.LINE_CHARS, None)


def test_last_lines_reads_only_the_end_of_a_long_log(tmp_path, monkeypatch):
    monkeypatch.setattr(logs, "TAIL_BYTES", 300)  # a shrunk knob: the first line read is cut
    _worker_log(tmp_path, [(logging.WARNING, "w" * 400), *((logging.INFO, f"line {i}") for i in range(5))])
    assert logs.last_lines(tmp_path, "w2.0") == ("line 4", None)


# --- the dequeue budget, as run_worker returns ------------------------------------------------------------
def _context(tmp_path, dequeues: int | None) -> WorkerContext:
    s = Schedule(jobs=(JobSpec(id=1), JobSpec(id=2)), dequeues=dequeues)
    return WorkerContext(WorkerSpec("w1.0", s, "dbname=none", tmp_path))


def test_budget_spent_by_this_process_or_by_the_started_records_of_its_children(tmp_path):
    assert not _context(tmp_path, None).budget_spent()  # no budget: a return is the worker's own
    ctx = _context(tmp_path, 2)
    assert not ctx.budget_spent()
    ctx.dequeues = 2  # the body's executions here (ctx.execution counts them)
    assert ctx.budget_spent()
    (tmp_path / "children").mkdir()
    other = _context(tmp_path / "children", 2)
    child = ExecLog(path_for(tmp_path / "children", "w1.0"), "w1.0")  # a library's child: the same log
    child.write("started", job=1, attempt=1)
    assert not other.budget_spent()
    child.write("started", job=2, attempt=1)
    child.close()
    assert other.budget_spent() and other.dequeues == 0


# --- what the properties and the timeline say -------------------------------------------------------------
def _left_behind() -> History:
    """w1.0 ran job 1 and stopped by itself; job 2 never ran (nothing replaced it in this history)."""
    return sane(records=execution("w1.0", 1, 1, 1.0, 2.0), jobs=[job(1), job(2, "queued", 0)],
                exits=[stopped("w1.0", detail="Stop requested", warning="Side task listener failed")],
                runs=[], transitions=None)


def test_progress_and_terminal_states_name_the_worker_that_stopped_by_itself():
    h = _left_behind()
    for name in ("progress", "terminal-states"):
        r = one(name, h)
        assert r.status == VIOLATED, r
        assert r.evidence.endswith("; w1.0 stopped by itself: Stop requested (last warning: Side task "
                                   "listener failed)"), r.evidence
    h.exits = [budget_exit("w1.0")]
    assert "stopped by itself" not in one("progress", h).evidence


def test_a_worker_that_stopped_by_itself_during_a_job_counts_as_a_death_for_the_blast_radius():
    exits = [died(f"w1.{i}", 1, t=float(i)) for i in range(3)] + [stopped("w1.3", 3.5, job_=1)]
    assert one("bounded-blast-radius", sane(exits=exits)).status == VIOLATED
    assert one("bounded-blast-radius", sane(exits=exits[:3] + [budget_exit("w1.3")])).status == HELD


def test_the_timeline_says_it_stopped_by_itself_and_why():
    text = timeline(_left_behind())
    assert "w1.0   process ended: stopped by itself: Stop requested (last warning: Side task listener " \
           "failed)" in text, text
