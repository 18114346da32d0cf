-- The harness's bookkeeping beside pgqueuer's own tables (adapters/pgqueuer.py). pgqueuer deletes a
-- job's row when it finishes and its log keeps no payload, so the tenant of each job is kept here;
-- each worker records the heartbeat_timeout it runs with, so final_states can say whether a job
-- left 'picked' has a heartbeat pgqueuer's own dequeue would consider stale.

-- name: create_side_tables
create table if not exists pgjc_pgqueuer_jobs (
    job_id     bigint primary key,
    library_id bigint not null unique,
    tenant_id  int
);
create table if not exists pgjc_pgqueuer_workers (
    identity          text not null,
    queue_manager_id  uuid not null,
    heartbeat_timeout interval not null,
    started           timestamptz not null default now()
);

-- name: reset
truncate pgqueuer, pgqueuer_log, pgqueuer_statistics, pgqueuer_schedules,
         pgjc_pgqueuer_jobs, pgjc_pgqueuer_workers restart identity;

-- name: record_job
insert into pgjc_pgqueuer_jobs (job_id, library_id, tenant_id) values (%(job)s, %(library_id)s, %(tenant)s);

-- name: record_worker
insert into pgjc_pgqueuer_workers (identity, queue_manager_id, heartbeat_timeout)
values (%(identity)s, %(qm)s, make_interval(secs => %(timeout)s));

-- name: pending
-- What pgqueuer's dequeue may still act on: queued jobs (retries included, whatever their
-- execute_after) and picked ones (running, or stale and waiting for another worker to re-pick them).
-- 'failed' (on_failure='hold', not used here) waits for a human and is not counted.
select count(*) from pgqueuer where status in ('queued', 'picked');

-- name: final_states
-- One row per schedule job: its row in pgqueuer when it is still there, else the last terminal
-- status pgqueuer_log has for it; retries as pgqueuer counts them (the 'queued' log rows that
-- retry_job writes with a traceback; enqueue's own 'queued' row has none); the last error recorded.
with terminal as (
    select distinct on (job_id) job_id, status::text as status
      from pgqueuer_log
     where status in ('successful', 'exception', 'canceled', 'deleted', 'failed')
     order by job_id, id desc
), retries as (
    select job_id, count(*) as n
      from pgqueuer_log
     where status = 'queued' and traceback is not null
     group by job_id
), picks as (
    select job_id, count(*) as n from pgqueuer_log where status = 'picked' group by job_id
), errors as (
    select distinct on (job_id) job_id,
           (traceback ->> 'exception_type') || ': ' || (traceback ->> 'exception_message') as error
      from pgqueuer_log
     where traceback is not null
     order by job_id, id desc
), timeout as (
    select max(heartbeat_timeout) as t from pgjc_pgqueuer_workers
)
select m.job_id, j.tenant_id,
       q.status::text as queue_status, q.attempts as queue_attempts,
       t.status as log_status, coalesce(r.n, 0) as retries, coalesce(p.n, 0) as picks,
       e.error,
       case when q.status = 'picked' and (select t from timeout) is not null
            then q.heartbeat < now() - (select t from timeout) end as lease_expired
  from job_map m
  left join pgjc_pgqueuer_jobs j on j.job_id = m.job_id
  left join pgqueuer q on q.id = m.library_id::bigint
  left join terminal t on t.job_id = m.library_id::bigint
  left join retries r on r.job_id = m.library_id::bigint
  left join picks p on p.job_id = m.library_id::bigint
  left join errors e on e.job_id = m.library_id::bigint
 order by m.job_id;
