"""A hosted library through a failover (issue 37 item 5): awa, whose client takes one host, on the
endpoint that follows the primary (``harness/net/endpoint.py``). Its workers' connections break at the
promotion, and awa reconnects by itself on the same one-host DSN: the job ends done on the new primary,
no job is left stuck. (On the multi-host DSN every awa worker failed with "invalid port number".)"""

from __future__ import annotations

import pytest

pytest.importorskip("awa", reason="awa-pg is not installed (pip install -e '.[libraries]')")

from pg_job_chaos.adapters.awa import Awa  # noqa: E402
from pg_job_chaos.core.schedule import Event, JobSpec, Schedule  # noqa: E402
from pg_job_chaos.harness.postgres import ServerSpec, provision  # noqa: E402
from pg_job_chaos.harness.runner import Runner  # noqa: E402
from pg_job_chaos.properties import HELD, check  # noqa: E402

pytestmark = [pytest.mark.chaos, pytest.mark.xdist_group("replica")]


def test_awa_on_the_endpoint_reconnects_by_itself_after_a_promotion():
    with provision(ServerSpec(replica="async")) as db, Runner(db) as runner:
        schedule = Schedule(jobs=(JobSpec(1),), workers=2, design="pg_job_chaos.adapters.awa:Awa",
                            time_scale=Awa.min_time_scale,
                            events=(Event("failover", 1, point="before-tenant", variant="switchover"),))
        h = runner.run(schedule)
        faults = [i["fault"] for i in h.injected]
        assert faults[0] == "failover" and faults[-2:] == ["primary-stopped", "promoted"], faults
        assert "," not in runner._worker_dsn(runner.design(h.schedule))  # the workers' DSN: the endpoint
        assert h.ended_by == "quiescent" and [j["status"] for j in h.jobs] == ["done"], (h.ended_by, h.jobs)
        results = check(h)
        for name in ("acknowledged-enqueue", "attempts-monotonic", "failover-recovers", "library-one-finish"):
            assert results[name].status == HELD, (name, results[name].evidence)
