"""``run.py soak`` on a hosted control (harness/bench/soak.py): its options reach the run, its kept
properties are judged on it (not left unknown) and the saved run is what the counts are read from.
One round, the small-scope pass's first schedule (no fault; one job, two workers), about 5 s; the
false-alarm rate itself is a soak's, in docs/findings/benchmarks.md."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("dbos", reason="dbos is not installed (pip install -e '.[libraries]')")

from pg_job_chaos.harness.bench import soak  # noqa: E402

pytestmark = [pytest.mark.chaos]


def test_one_round_of_a_hosted_control_is_saved_with_its_options_and_judged(runner, tmp_path):
    control = soak.BY_NAME["dbos-transaction"]
    # the clock is read before each run: minutes this small let the first one start and no other
    soak.soak(runner, [control], tmp_path, minutes=0.001, seed=1, examples=1)
    (line,) = (tmp_path / soak.RUNS).read_text().splitlines()
    run = json.loads(line)
    assert (run["control"], run["seed"], run["label"]) == ("dbos-transaction", None,
                                                           "no fault; one job, two workers")
    assert run["schedule"]["design"] == "dbos"
    assert run["schedule"]["design_options"] == {"finish": "transaction"}
    assert {k: run["verdicts"][k] for k in control.keeps} == {k: "held" for k in control.keeps}
    assert run["false_alarms"] == {}
    counts = soak.tally(tmp_path)
    assert (counts["dbos-transaction"].runs, counts["dbos-transaction"].false_alarms) == (1, 0)
