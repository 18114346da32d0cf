-- django-tasks-db's one table, read by adapters/django_tasks.py (never written but by reset): what its
-- migrations create (django_tasks_db/models.py DBTaskResult, app label django_tasks_database). Every
-- state change is the library's own ORM save (models.py: claim, set_successful, set_failed).

-- name: grantable
-- The library's tables, for the worker role's grants (its migrations' table; django_migrations is the
-- owner's bookkeeping, not the worker's).
select c.relname
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = current_schema() and c.relkind = 'r' and c.relname like 'django\_tasks\_database\_%'
 order by c.relname;

-- name: reset
truncate django_tasks_database_dbtaskresult;

-- name: pending
-- What a db_worker may still act on. READY: a worker's loop fetches it (models.py:109-117, ready()).
-- RUNNING: only the worker that claimed it finishes it (db_worker.py:163-205); nothing else ever
-- touches a RUNNING row (no stale-task recovery in django-tasks-db 0.13.0). Its claimer is the last
-- of worker_ids (models.py:262, the worker passed --worker-id, its identity), alive while its Django
-- connection (application_name '<identity>/queue') is open: the connection that claimed the row
-- stays open until the finish's save (close_old_connections runs only between tasks,
-- db_worker.py:108 and 155). A RUNNING row of a dead worker is acted on by nobody: not counted.
select count(*)
  from pgjc.job_map m
  join django_tasks_database_dbtaskresult t on t.id::text = m.library_id
 where t.status = 'READY'
    or (t.status = 'RUNNING'
        and exists (select 1 from pg_stat_activity a
                     where a.datname = current_database()  -- another run's w1.0 elsewhere is not this one's
                       and a.application_name = (t.worker_ids ->> -1) || '/queue'));

-- name: final_states
-- One row per schedule job: its status ('absent': no row), the claims (worker_ids, one entry per claim:
-- models.py:262), the exception class of a failure (models.py:287). No lease: lease_expired left out.
select m.job_id as id, (t.args_kwargs -> 'kwargs' ->> 'tenant')::int as tenant_id,
       coalesce(t.status, 'absent') as status, coalesce(jsonb_array_length(t.worker_ids), 0) as attempts,
       nullif(t.exception_class_path, '') as last_error
  from pgjc.job_map m
  left join django_tasks_database_dbtaskresult t on t.id::text = m.library_id
 order by m.job_id;

-- name: accepted_finishes
-- What the row keeps of its finish: set_successful / set_failed (models.py:265-299) overwrite status
-- and finished_at (the worker's timezone.now()); no history, one finish at most, by the attempt it
-- ran as (the claims). A RUNNING or READY row has none.
select m.job_id as id,
       case t.status when 'SUCCESSFUL' then 'success' when 'FAILED' then 'failure' end as outcome,
       'status ' || t.status as what, t.finished_at as at, 'worker' as clock,
       coalesce(jsonb_array_length(t.worker_ids), 0) as attempt,
       format('dbtaskresult status %s, worker_ids %s', t.status, t.worker_ids)
         || coalesce(', exception ' || nullif(t.exception_class_path, ''), '') as recorded
  from pgjc.job_map m
  join django_tasks_database_dbtaskresult t on t.id::text = m.library_id
 order by m.job_id;
