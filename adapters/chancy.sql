-- chancy's tables, read by adapters/chancy.py (and emptied between runs). Every state change is
-- chancy's own (Worker.fetch_jobs, Worker.flush, the Recovery plugin). Every name starts with the
-- prefix chancy is given, chancy_ (core and plugins alike).

-- name: tables
select tablename from pg_tables where schemaname = 'public' and tablename like 'chancy\_%';

-- name: unlogged_tables
-- chancy's UNLOGGED tables (chancy_leader, chancy_workers, chancy_queue_rate_limits in its v1 migration).
select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = 'public' and c.relname like 'chancy\_%' and c.relkind in ('r', 'p')
   and c.relpersistence = 'u';

-- name: sequences
select sequencename from pg_sequences where schemaname = 'public' and sequencename like 'chancy\_%';

-- name: pending
-- What a worker or the Recovery plugin may still act on: pending, retrying (fetched once due) and
-- running (its worker finishes it, or Recovery takes it back once its worker is not seen).
select count(*) from chancy_jobs where state in ('pending', 'retrying', 'running');

-- name: final_states
-- One row per schedule job: chancy's state and attempts (added to when an execution completes,
-- Executor.on_job_completed), the last line of its last error's traceback, and for a running job
-- whether its worker has no chancy_workers row alive (expires_at >= now(), last_seen plus the
-- heartbeat timeout: Worker.announce_worker) -- what Recovery.recover would take.
select m.job_id as id, (j.kwargs -> 'args' ->> 'tenant')::int as tenant_id, j.state as status,
       j.attempts, nullif(substring(rtrim(j.errors -> -1 ->> 'traceback', E' \t\r\n')
                                    from '[^\r\n]*$'), '') as last_error,
       case when j.state = 'running'
            then not exists (select 1 from chancy_workers w
                              where w.worker_id = j.taken_by and w.expires_at >= now())
       end as lease_expired
  from pgjc.job_map m
  join chancy_jobs j on j.id::text = m.library_id
 order by m.job_id;

-- name: accepted_finishes
-- chancy's row of every schedule job: what its last accepted completion wrote (worker.py
-- Worker.flush, fenced by claim_id): state, attempts, the errors list, completed_at
-- (adapters/finishes.py reads them).
select m.job_id as id, j.state, j.attempts, j.max_attempts, j.errors, j.completed_at
  from pgjc.job_map m
  join chancy_jobs j on j.id::text = m.library_id
 order by m.job_id;

-- name: drop_tenant_queues
-- fairness=per-tenant-queue: the previous run's tenant queues (a worker polls every declared queue).
delete from chancy_queues where name like 'tenant\_%';
