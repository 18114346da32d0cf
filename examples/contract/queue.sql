-- The reference queue of the worker contract (docs/contract.md): a lease queue, as small as one can
-- be and still be a real one -- FOR UPDATE SKIP LOCKED claims, a lease, retries up to max_attempts,
-- a job whose lease expired claimable again. No heartbeat and no fencing: a job that outlives its
-- lease runs twice (what the harness must find). worker.py and worker.js send these same statements.

-- name: install
create table if not exists contract_jobs (
    id bigserial primary key,
    args jsonb not null,
    status text not null default 'queued',  -- queued | running | done | failed
    attempts int not null default 0,
    max_attempts int not null,
    locked_until timestamptz,
    last_error text
);

-- name: grant
grant select, insert, update, delete on contract_jobs to {role};
grant usage on sequence contract_jobs_id_seq to {role};

-- name: reset
truncate contract_jobs restart identity;

-- name: enqueue
insert into contract_jobs (args, max_attempts) values (%(args)s::jsonb, %(max_attempts)s) returning id;

-- name: claim
-- The oldest queued job, or a running one whose lease expired, while attempts remain.
update contract_jobs set status = 'running', attempts = attempts + 1,
       locked_until = now() + make_interval(secs => %(lease)s)
where id = (
    select id from contract_jobs
    where (status = 'queued' or (status = 'running' and locked_until < now())) and attempts < max_attempts
    order by id limit 1 for update skip locked)
returning id, args, attempts;

-- name: finish
update contract_jobs set status = 'done', locked_until = null where id = %(id)s;

-- name: fail
update contract_jobs set status = case when attempts >= max_attempts then 'failed' else 'queued' end,
       locked_until = null, last_error = %(error)s
where id = %(id)s;

-- name: pending
select count(*) from contract_jobs
where status = 'queued' or (status = 'running' and (locked_until >= now() or attempts < max_attempts));

-- name: final_states
select id::text, status, attempts, last_error, case when status = 'running' then locked_until < now() end
from contract_jobs;
