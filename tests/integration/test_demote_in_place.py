"""The failover variant ``demote-in-place`` on a real pair: the standby is promoted while the old
primary stays up, not in recovery, with its sessions open -- through the endpoint and through the
multi-host DSN -- and every transaction they start from then on read-only; a transaction already
under way still commits there (on the old node only); new connections on either DSN reach the new
primary. Between runs the old node is stopped and rewound into the standby, and with the pair nothing
is left."""

from __future__ import annotations

import psycopg
import pytest

from pg_job_chaos.harness.postgres import ServerSpec, provision
from tests.integration.test_replica import _servers

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("harness-processes")]

WHERE = "select current_setting('port')::int, pg_backend_pid(), pg_is_in_recovery()"


def test_demote_in_place_leaves_the_old_node_up_read_only_with_its_sessions_open():
    with provision(ServerSpec(replica="async")) as db:
        pair = db.replica
        old, new = pair.primary, pair.standby
        through_endpoint = pair.one_host_dsn(db.admin_dsn)
        with psycopg.connect(db.admin_dsn, autocommit=True) as conn:
            conn.execute("create table pgjc.probe (x int)")
            conn.execute("insert into pgjc.probe values (1)")
        kept = [psycopg.connect(d, autocommit=True) for d in (through_endpoint, db.admin_dsn)]
        before = [c.execute(WHERE).fetchone() for c in kept]
        assert [b[0] for b in before] == [old.port, old.port]
        under_way = psycopg.connect(db.admin_dsn)  # a transaction that wrote before the flip, still open
        under_way.execute("insert into pgjc.probe values (2)")

        promotion = pair.demote_in_place()

        assert promotion is not None and promotion.seconds == pair.promotions[-1] > 0
        assert pair.primary is new and pair.down is old and old.proc.poll() is None  # the old node runs
        with psycopg.connect(old.admin_dsn, autocommit=True) as conn:
            assert conn.execute("select pg_is_in_recovery(), current_setting('default_transaction_read_only')"
                                ).fetchone() == (False, "on")
        for conn, was in zip(kept, before, strict=True):
            assert conn.execute(WHERE).fetchone() == was  # the same session on the old node, open
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction,
                               match="cannot execute UPDATE in a read-only transaction"):
                conn.execute("update pgjc.probe set x = x")
        under_way.commit()  # begun before the flip: it commits, on the old node only
        for x, dsn in ((3, through_endpoint), (4, db.admin_dsn)):  # a new connection reaches the new primary
            with psycopg.connect(dsn, autocommit=True) as conn:
                assert conn.execute(WHERE).fetchone()[::2] == (new.port, False)
                conn.execute("insert into pgjc.probe values (%s)", (x,))
        with psycopg.connect(db.admin_dsn, autocommit=True) as conn:  # not the old node's commit of 2
            assert conn.execute("select array_agg(x order by x) from pgjc.probe").fetchone() == ([1, 3, 4],)
        assert (pair.cut_standby(), pair.arm_switchover(), pair.demote_in_place()) == (None, False, None)

        seconds = pair.settle()  # the old node stopped (its sessions end) and rewound into the standby
        assert seconds is not None and pair.standby is old and not pair.demoted
        for conn in (*kept, under_way):
            with pytest.raises(psycopg.OperationalError):
                conn.execute("select 1")
            conn.close()
        with psycopg.connect(old.admin_dsn.replace("dbname=postgres", f"dbname={db.database}")) as conn:
            got = conn.execute("select pg_is_in_recovery(), current_setting('default_transaction_read_only'),"
                               " (select array_agg(x order by x) from pgjc.probe)").fetchone()
            assert got == (True, "off", [1, 3, 4])
        run_dir = pair.run_dir
    assert not run_dir.exists() and not _servers(run_dir)
