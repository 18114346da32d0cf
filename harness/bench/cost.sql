-- What a design costs per job (harness/bench/cost.py), read from a session in another database.

-- name: clear_snapshot
-- Statistics are read once per transaction unless cleared: see the counter as it is now.
select pg_stat_clear_snapshot();

-- name: transactions
-- Every transaction the run's database committed or rolled back so far.
select xact_commit + xact_rollback from pg_stat_database where datname = %(db)s;
