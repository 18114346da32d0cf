"""Explained verdicts (properties/explain.py): a consequence names its cause (no database)."""

from __future__ import annotations

from pg_job_chaos.properties import VIOLATED, Result, aggregate
from pg_job_chaos.properties.explain import explain
from tests.unit.test_properties import sane


def violated(name, jobs, evidence="x") -> Result:
    return Result(name, VIOLATED, len(jobs), tuple(jobs), evidence)


def test_terminal_states_of_a_crash_looping_job_is_a_consequence_of_bounded_attempts():
    results = {"bounded-attempts": violated("bounded-attempts", [1], "job 1 ran 4 times"),
               "terminal-states": violated("terminal-states", [1], "job 1 still running, attempts 4")}
    out = explain(sane(ended_by="quiescent"), results)
    assert out["terminal-states"].cause == "bounded-attempts"
    assert out["terminal-states"].evidence == ("consequence of job 1's crash loop, see bounded-attempts: "
                                               "job 1 still running, attempts 4")
    assert out["terminal-states"].to_dict()["caused_by"] == "bounded-attempts"
    assert out["bounded-attempts"] == results["bounded-attempts"]  # the root cause stays a finding


def test_a_violation_of_other_jobs_is_explained_only_when_the_budget_ended_the_run():
    results = {"bounded-blast-radius": violated("bounded-blast-radius", [1]),
               "progress": violated("progress", [2], "job 2 never ran")}
    assert explain(sane(ended_by="quiescent"), results)["progress"].cause == ""  # a finding of its own
    exhausted = explain(sane(ended_by="workers-exhausted"), results)["progress"]
    assert exhausted.cause == "bounded-blast-radius" and \
        exhausted.evidence.startswith("consequence of job 1's")
    alone = explain(sane(ended_by="workers-exhausted"), {"progress": violated("progress", [2])})["progress"]
    assert (alone.cause, alone.evidence) == ("budget", "the run ended when its worker budget was spent: x")


def test_an_unexplained_run_keeps_the_aggregate_a_finding():
    caused = Result("progress", VIOLATED, 1, (2,), "consequence of ...", cause="budget")
    plain = Result("progress", VIOLATED, 1, (3,), "job 3 never ran")
    agg = aggregate([{"progress": caused}, {"progress": plain}])["progress"]
    assert (agg.cause, agg.jobs, agg.evidence) == ("", (3,), "in 2 of 2 runs: job 3 never ran")
    assert aggregate([{"progress": caused}])["progress"].cause == "budget"
