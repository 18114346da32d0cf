"""An UNLOGGED table's sequence after a promotion (issue 46 item 2), on the replicated back end.

PostgreSQL's replay of a sequence's WAL record (``seq_redo``) writes an unlogged sequence's init fork
into a buffer it does not flush; a promotion copies the init fork *from disk* into the sequence, so a
standby that has not flushed it since (no restartpoint between) comes up with a page of zeros, and the
next ``nextval`` or ``TRUNCATE ... RESTART IDENTITY`` fails with "bad magic number in sequence". Fixed
upstream in 15.19, 17.11 and 18.6 ("Fix corruption of unlogged sequences after standby promotion");
the wheel's 17.10 has the bug. chancy's ``chancy_leader`` is such a table, and the harness's reset of
chancy used to restart its identity each run, which re-created the sequence on the primary before every
failover.

What this asserts, on the pair's default server (17.10): a sequence restarted on the primary before a
promotion is corrupt on the new primary (the old reset's statement fails there), while chancy's reset
(unlogged tables emptied without restarting their sequences) succeeds on the same node and chancy's
leader row, inserted with its explicit id as ``Leadership`` does, goes in."""

from __future__ import annotations

import psycopg
import pytest

pytest.importorskip("chancy", reason="chancy is not installed (pip install -e '.[libraries]')")

from pg_job_chaos.core.schedule import JobSpec, Schedule  # noqa: E402
from pg_job_chaos.harness.postgres import ServerSpec, provision  # noqa: E402
from pg_job_chaos.harness.runner import Runner  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("replica")]

BAD_MAGIC = "bad magic number in sequence"
# chancy's Leadership.insert_q (chancy/plugins/leadership.py): the row's id is given, never drawn.
LEADER_ROW = ("insert into chancy_leader (id, worker_id, expires_at) "
              "values (1, 'w', now() + interval '1 minute')")


def test_chancy_reset_survives_the_unlogged_sequence_a_promotion_corrupts():
    with provision(ServerSpec(replica="async")) as db, Runner(db) as runner:
        pair = db.replica
        schedule = runner.stamp(Schedule(jobs=(JobSpec(1),), design="chancy", time_scale=3.0))
        runner.prepare(schedule)  # chancy installed, reset
        pair.settle()
        # What the old reset did before every run: the sequence gets a new file and init fork on the
        # primary, which the standby has from WAL replay only.
        runner.admin.execute("truncate chancy_leader restart identity")
        pair.wait_caught_up()
        major = runner.admin.execute("select current_setting('server_version')").fetchone()[0]
        pair.crash()
        pair.start_again()
        # its connection was the old primary's: a new one, as the runner makes after a restart
        runner.admin.close()
        runner.admin = psycopg.connect(db.admin_dsn, autocommit=True)
        assert runner.admin.execute("select pg_is_in_recovery()").fetchone() == (False,)
        with pytest.raises(psycopg.Error, match=BAD_MAGIC):
            runner.admin.execute("truncate chancy_leader restart identity")  # the old reset, on 17.10
        runner.prepare(schedule)  # chancy's reset as it is now, on the same promoted node
        runner.admin.execute(LEADER_ROW)
        assert runner.admin.execute("select id, worker_id from chancy_leader").fetchall() == [(1, "w")]
        assert major.startswith("17.10"), major  # the server this was measured on, which lacks the fix
