-- The horizon experiment (harness/experiments/horizon.py): a queue table of its own, so the
-- shared jobs table is not disturbed. Identifiers in {braces} are filled in with sql.Identifier.

-- name: create
-- A fresh queue of {n} jobs; the worker role may dequeue from it.
drop table if exists pgjc.exp_horizon_jobs;
create table pgjc.exp_horizon_jobs (
    id      bigint primary key,
    status  text not null default 'queued',
    payload jsonb not null default '{{}}'  -- {{}}: escaped for sql.SQL.format
);
insert into pgjc.exp_horizon_jobs (id) select g from generate_series(1, {n}) g;
grant select, update, delete on pgjc.exp_horizon_jobs to {worker};
analyze pgjc.exp_horizon_jobs;

-- name: partial_index
-- The status = 'done' design: a partial index on queued jobs only.
create index exp_horizon_queued on pgjc.exp_horizon_jobs (id) where status = 'queued';

-- name: drop
drop table if exists pgjc.exp_horizon_jobs;

-- name: dequeue_delete
-- The shortest dequeue: take the oldest job and delete it.
delete from pgjc.exp_horizon_jobs
 where id = (select id from pgjc.exp_horizon_jobs order by id limit 1 for update skip locked)
returning id;

-- name: dequeue_done
-- The same with status = 'done' instead of delete, through the partial index.
update pgjc.exp_horizon_jobs set status = 'done'
 where id = (select id from pgjc.exp_horizon_jobs where status = 'queued' order by id limit 1
               for update skip locked)
returning id;

-- name: hold_xid
-- A transaction that has an xid (as if it had written), then sits idle.
select pg_current_xact_id()::text;

-- name: hold_snapshot
-- A REPEATABLE READ transaction that only reads: it keeps its snapshot between statements.
select count(*) from pgjc.tenants;

-- name: backend_alive
-- Is the holder's session still there?
select count(*) from pg_stat_activity where pid = %(pid)s;
