-- The harness's bookkeeping beside pgqueuer's own tables (adapters/pgqueuer.py). pgqueuer deletes a
-- job's row when it finishes and its log keeps no payload, so the tenant of each job is kept here.

-- name: create_side_tables
create table if not exists pgjc_pgqueuer_jobs (
    job_id     bigint primary key,
    library_id bigint not null unique,
    tenant_id  int
);

-- name: reset
truncate pgqueuer, pgqueuer_log, pgqueuer_statistics, pgqueuer_schedules,
         pgjc_pgqueuer_jobs restart identity;

-- name: record_job
insert into pgjc_pgqueuer_jobs (job_id, library_id, tenant_id) values (%(job)s, %(library_id)s, %(tenant)s);

-- name: pending
-- What pgqueuer's dequeue may still act on: queued jobs (retries included, whatever their
-- execute_after) and picked ones (running, or stale and waiting for another worker to re-pick them).
-- 'failed' (on_failure='hold', not used here) waits for a human and is not counted.
select count(*) from pgqueuer where status in ('queued', 'picked');

-- name: final_states
-- One row per schedule job: its row in pgqueuer when it is still there, else the last terminal
-- status pgqueuer_log has for it ('absent': neither). attempts: the executions pgqueuer counted --
-- for a row, its attempts (the retries so far) plus one once picked; for a finished job (row gone),
-- the retries (the 'queued' log rows retry_job writes with a traceback; enqueue's own 'queued' row
-- has none) plus one, none for a job deleted unpicked; a stale re-pick counts nothing in pgqueuer.
-- The last error recorded; for a picked job, whether its heartbeat is older than the
-- heartbeat_timeout the workers run with (%(timeout)s seconds, NULL when unknown) -- what
-- build_dequeue_query's next_stale tests.
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
)
select m.job_id as id, j.tenant_id, coalesce(q.status::text, t.status, 'absent') as status,
       case when q.status is not null then q.attempts + (q.status = 'picked')::int
            when t.status is not null
            then coalesce(r.n, 0) + (t.status <> 'deleted' or coalesce(p.n, 0) > 0)::int
       end as attempts,
       e.error as last_error,
       case when q.status = 'picked'
            then q.heartbeat < now() - make_interval(secs => %(timeout)s::float8) end as lease_expired
  from pgjc.job_map m
  left join pgjc_pgqueuer_jobs j on j.job_id = m.job_id
  left join pgqueuer q on q.id = m.library_id::bigint
  left join terminal t on t.job_id = m.library_id::bigint
  left join retries r on r.job_id = m.library_id::bigint
  left join picks p on p.job_id = m.library_id::bigint
  left join errors e on e.job_id = m.library_id::bigint
 order by m.job_id;

-- name: accepted_finishes
-- Every pgqueuer_log row of a schedule job, in its order: enqueue ('queued', no traceback), every
-- claim ('picked', re-picks included: qb.py build_dequeue_query's log_pick), every retry ('queued'
-- with a traceback: build_retry_job_query) and the finish (build_log_job_query: written only when
-- its DELETE found the row), each at now() (adapters/finishes.py reads them).
select m.job_id as id, l.status::text as status, l.created as at, l.traceback is not null as traceback
  from pgjc.job_map m
  left join pgqueuer_log l on l.job_id = m.library_id::bigint
 order by m.job_id, l.id;

-- name: final_states_0x
-- final_states for pgqueuer 0.x (before 1.0; the corpus's versions, adapters/pgqueuer.py LEGACY): no
-- attempts column and no 'failed' status (so statuses are compared as text), no database retry. attempts:
-- one once the job was picked (a 'picked' row, or a terminal log row other than 'deleted'), as 1.x counts a
-- stale re-pick: 0.x counts no execution at all.
with terminal as (
    select distinct on (job_id) job_id, status::text as status
      from pgqueuer_log
     where status::text in ('successful', 'exception', 'canceled', 'deleted')
     order by job_id, id desc
), errors as (
    select distinct on (job_id) job_id,
           (traceback ->> 'exception_type') || ': ' || (traceback ->> 'exception_message') as error
      from pgqueuer_log
     where traceback is not null
     order by job_id, id desc
)
select m.job_id as id, j.tenant_id, coalesce(q.status::text, t.status, 'absent') as status,
       case when q.status is not null then (q.status::text = 'picked')::int
            when t.status is not null then (t.status <> 'deleted')::int
       end as attempts,
       e.error as last_error,
       case when q.status::text = 'picked'
            then q.heartbeat < now() - make_interval(secs => %(timeout)s::float8) end as lease_expired
  from pgjc.job_map m
  left join pgjc_pgqueuer_jobs j on j.job_id = m.job_id
  left join pgqueuer q on q.id = m.library_id::bigint
  left join terminal t on t.job_id = m.library_id::bigint
  left join errors e on e.job_id = m.library_id::bigint
 order by m.job_id;
