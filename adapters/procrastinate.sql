-- The harness's reading of procrastinate's tables (adapters/procrastinate.py). Never a write to them:
-- procrastinate's own schema.sql functions do every state change.

-- name: installed
-- Whether procrastinate's schema is already in this database.
select to_regclass('procrastinate_jobs') is not null;

-- name: grantable
-- procrastinate's tables and sequences, for the worker role's grants.
select c.relname, c.relkind
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = current_schema()
   and c.relkind in ('r', 'S')
   and c.relname like 'procrastinate\_%'
 order by c.relname;

-- name: reset
-- Between runs: every procrastinate table (jobs, events, periodic defers, workers).
truncate procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs, procrastinate_workers
restart identity;

-- name: pending
-- The schedule's jobs procrastinate may still act on: todo (a worker will fetch it), doing (its
-- worker runs it, or -- with the documented recovery -- retry_stalled_jobs will requeue it once the
-- worker's heartbeat is stale). Without the recovery, a doing job of a stalled worker is acted on by
-- nobody and is not counted (stale: the workers' threshold, the lease). The recovery's own periodic
-- jobs are not the schedule's: never counted.
select count(*)
  from procrastinate_jobs j
  join pgjc.job_map m on m.library_id = j.id::text
  left join procrastinate_workers w on w.id = j.worker_id
 where j.status = 'todo'
    or (j.status = 'doing' and (%(recovery)s
        or not (j.worker_id is null
                or coalesce(w.last_heartbeat < now() - make_interval(secs => %(stale)s), false))));

-- name: final_states
-- One row per schedule job. attempts: procrastinate's count of the executions that ended, plus the one
-- in progress for a doing job (procrastinate itself treats it as attempt attempts + 1, retry.py).
-- lease_expired: the condition of procrastinate's own select_stalled_jobs_by_heartbeat (queries.sql)
-- for a doing job -- no worker row, or a heartbeat older than the threshold the workers used (the
-- lease, from for_run); null when the job is not doing or the threshold is unknown. procrastinate
-- stores no error text (only procrastinate_events types): last_error is null.
select m.job_id as id, (j.args ->> 'tenant')::int as tenant_id, j.status::text as status,
       j.attempts + (j.status = 'doing')::int as attempts, null::text as last_error,
       case when j.status = 'doing' and %(stale)s::float8 is not null
            then j.worker_id is null
                 or coalesce(w.last_heartbeat < now() - make_interval(secs => %(stale)s::float8), false)
       end as lease_expired
  from pgjc.job_map m
  join procrastinate_jobs j on j.id::text = m.library_id
  left join procrastinate_workers w on w.id = j.worker_id
 order by m.job_id;

-- name: accepted_finishes
-- Every event procrastinate's triggers wrote for a schedule job (schema.sql,
-- procrastinate_trigger_function_status_events_update_v1: one row per status transition, at now()),
-- in its order, with the job's final status and attempts (adapters/finishes.py reads them).
-- 'scheduled' is no transition: left out.
select m.job_id as id, j.status::text as status, j.attempts, e.type::text as event, e.at
  from pgjc.job_map m
  join procrastinate_jobs j on j.id::text = m.library_id
  left join procrastinate_events e on e.job_id = j.id and e.type is distinct from 'scheduled'
 order by m.job_id, e.id;
