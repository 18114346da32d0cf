-- The vacuum experiment (harness/experiments/vacuum.py): a queue table of its own.
-- Identifiers in {braces} are filled in with sql.Identifier.

-- name: create
-- Job 0 is the long job; jobs 1..n are the short ones. Autovacuum off on this table, so that our
-- VACUUM is the one that counts.
drop table if exists pgjc.exp_vacuum_jobs;
create table pgjc.exp_vacuum_jobs (
    id        bigint primary key,
    tenant_id int not null,
    status    text not null default 'queued',
    attempts  int not null default 0
) with (autovacuum_enabled = false);
create index exp_vacuum_queued on pgjc.exp_vacuum_jobs (id) where status = 'queued';
insert into pgjc.exp_vacuum_jobs (id, tenant_id) select g, mod(g, 100) + 1 from generate_series(0, {n}) g;
grant select, update on pgjc.exp_vacuum_jobs to {worker};
analyze pgjc.exp_vacuum_jobs;

-- name: drop
drop table if exists pgjc.exp_vacuum_jobs;

-- name: short_job
-- The second worker's job: claim, count and finish in one short transaction (job 0 is not its).
update pgjc.exp_vacuum_jobs set status = 'done', attempts = attempts + 1
 where id = (select id from pgjc.exp_vacuum_jobs where status = 'queued' and id > 0
              order by id limit 1 for update skip locked)
returning id, tenant_id;

-- name: claim_for_update
-- one-transaction: the long job's row lock is its claim, held for the whole job.
select id from pgjc.exp_vacuum_jobs where id = 0 for update;

-- name: write
-- A long transaction that wrote: the lease design's work transaction (the job marked running).
update pgjc.exp_vacuum_jobs set status = 'running', attempts = attempts + 1 where id = 0;

-- name: lease_claim
-- The lease design with the work outside a transaction: a committed claim, nothing held after.
update pgjc.exp_vacuum_jobs set status = 'running', attempts = attempts + 1 where id = 0;

-- name: lease_finish
update pgjc.exp_vacuum_jobs set status = 'done' where id = 0;

-- name: read_only
-- A READ COMMITTED transaction that only read, then sits idle.
select count(*) from pgjc.exp_vacuum_jobs;

-- name: vacuum
vacuum (verbose) pgjc.exp_vacuum_jobs;
