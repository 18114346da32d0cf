-- The harness's reading of procrastinate's tables (adapters/procrastinate.py). Never a write to them:
-- procrastinate's own schema.sql functions do every state change.

-- name: installed
-- Whether procrastinate's schema is already in this database.
select to_regclass('procrastinate_jobs') is not null;

-- name: timing_table
-- The staleness threshold the workers' recovery uses (get_stalled_jobs' seconds_since_heartbeat),
-- written by each worker at start, so final_states can say which running job procrastinate itself
-- would call stalled. The harness's table, not procrastinate's.
create table if not exists pgjc_procrastinate_timing (
    key     text primary key,
    seconds double precision not null
);

-- name: grantable
-- procrastinate's tables and sequences (and the timing table), for the worker role's grants.
select c.relname, c.relkind
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = current_schema()
   and c.relkind in ('r', 'S')
   and (c.relname like 'procrastinate\_%' or c.relname = 'pgjc_procrastinate_timing')
 order by c.relname;

-- name: reset
-- Between runs: every procrastinate table (jobs, events, periodic defers, workers) and the timing.
truncate procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs, procrastinate_workers,
         pgjc_procrastinate_timing restart identity;

-- name: record_timing
insert into pgjc_procrastinate_timing (key, seconds) values ('seconds_since_heartbeat', %(seconds)s)
on conflict (key) do update set seconds = excluded.seconds;

-- name: pending
-- The schedule's jobs procrastinate may still act on: todo (a worker will fetch it), doing (its
-- worker runs it, or -- with the documented recovery -- retry_stalled_jobs will requeue it once the
-- worker's heartbeat is stale). Without the recovery, a doing job of a stalled worker is acted on by
-- nobody and is not counted. The recovery's own periodic jobs are not the schedule's: never counted.
select count(*)
  from procrastinate_jobs j
  join job_map m on m.library_id = j.id::text
  left join procrastinate_workers w on w.id = j.worker_id
  left join pgjc_procrastinate_timing t on t.key = 'seconds_since_heartbeat'
 where j.status = 'todo'
    or (j.status = 'doing' and (%(recovery)s
        or not (j.worker_id is null
                or coalesce(w.last_heartbeat < now() - make_interval(secs => coalesce(t.seconds, 30)), false))));

-- name: final_states
-- One row per schedule job. stale: the condition of procrastinate's own select_stalled_jobs_by_heartbeat
-- (queries.sql) for a doing job -- no worker row, or a heartbeat older than the threshold the workers
-- used; null when the job is not doing or no worker recorded its threshold.
select m.job_id, j.args ->> 'tenant', j.status::text, j.attempts,
       case when j.status = 'doing' and t.seconds is not null
            then j.worker_id is null
                 or coalesce(w.last_heartbeat < now() - make_interval(secs => t.seconds), false)
       end
  from job_map m
  join procrastinate_jobs j on j.id::text = m.library_id
  left join procrastinate_workers w on w.id = j.worker_id
  left join pgjc_procrastinate_timing t on t.key = 'seconds_since_heartbeat'
 order by m.job_id;
