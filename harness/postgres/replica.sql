-- The replicated back end's own statements (harness/postgres/replica.py), run as the admin role on
-- one node of the pair (never through the multi-host DSN: each names the node it means).

-- name: current_lsn
-- The primary's current WAL position: what a caught-up standby has replayed.
select pg_current_wal_lsn()::text;

-- name: replayed
-- The standby has replayed up to %(lsn)s (a primary's current position).
select coalesce(pg_last_wal_replay_lsn() >= %(lsn)s::pg_lsn, false);

-- name: receivers
-- The standby's WAL receivers: none once a cut took effect.
select count(*) from pg_stat_wal_receiver;

-- name: set_conninfo
-- Where the standby streams from ('' cuts its WAL receiver: the lag the failover fault makes). A
-- utility statement takes no parameter: the value is composed in as a literal.
alter system set primary_conninfo = {conninfo};

-- name: set_sync_names
-- Which standbys a commit waits for ('*': any; '': none, a primary alone).
alter system set synchronous_standby_names = {names};

-- name: set_read_only
-- demote-in-place: the old primary's transactions that start from the reload on are read-only (its
-- open sessions stay; a transaction already under way is not changed). A utility statement takes no
-- parameter: the value is composed in as a literal.
alter system set default_transaction_read_only = {value};

-- name: reset_read_only
-- The demoted node's setting removed before it is stopped and rewound into the standby.
alter system reset default_transaction_read_only;

-- name: reload
select pg_reload_conf();

-- name: promote
-- Promote the standby; true once it accepts writes (PostgreSQL waits up to wait_seconds).
select pg_promote(wait => true, wait_seconds => 60);

-- name: cancel_sync_waits
-- The sync variant with a cancelled wait: every commit waiting for the standby is cancelled, as its
-- client's cancel request does; the client gets its COMMIT acknowledged with a warning.
select pid, pg_cancel_backend(pid) from pg_stat_activity where wait_event = 'SyncRep';

-- name: persist
-- A setting the pair needs kept in the data directory too (postgresql.auto.conf), not only on the
-- command line: pg_rewind's crash recovery of an old primary starts it with the file's settings, and
-- a recovery without wal_log_hints would leave the node unrewindable.
alter system set {name} = {value};

-- name: checkpoint
-- After each reset, on both nodes (a restartpoint on the standby): the next rewind and the old
-- primary's recovery replay from here, not from the last timed checkpoint (before the article's data
-- was loaded, on a fresh pair: seconds of WAL).
checkpoint;
