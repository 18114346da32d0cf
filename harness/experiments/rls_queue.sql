-- The rls-queue experiment (harness/experiments/rls_queue.py): the tenant policy on jobs too.
-- Applied to the shared jobs table for the experiment only, and removed afterwards.

-- name: enable
-- The same policy as invoices, forced, on the queue table.
alter table pgjc.jobs enable row level security;
alter table pgjc.jobs force row level security;
create policy exp_tenant_jobs on pgjc.jobs
    using (tenant_id = nullif(current_setting('app.tenant', true), '')::int);

-- name: disable
-- Back to the design's default: no tenant policy on the queue.
drop policy if exists exp_tenant_jobs on pgjc.jobs;
alter table pgjc.jobs no force row level security;
alter table pgjc.jobs disable row level security;

-- name: count_jobs
-- How many jobs the worker can see.
select count(*) from pgjc.jobs;
