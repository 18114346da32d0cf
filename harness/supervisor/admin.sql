-- The supervisor's own statements (harness/supervisor/admin.py), run as the admin role.

-- name: activity
-- Sessions of our database other than the supervisor's, with their transaction state, for the
-- horizon property: an xid (the transaction wrote) or an xmin (a snapshot) held for how long.
select pid, application_name, state, backend_xid::text, backend_xmin::text,
       extract(epoch from clock_timestamp() - xact_start)::float8
  from pg_stat_activity
 where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend';

-- name: terminate
-- The terminate fault: end a worker's session from outside.
select pg_terminate_backend(%(pid)s);

-- name: hold_xid
-- The horizon fault, first variant: a transaction that has written something (it has an xid).
select txid_current();

-- name: hold_snapshot
-- The horizon fault, second variant: a REPEATABLE READ reader keeps its snapshot between statements.
select count(*) from pgjc.jobs;
