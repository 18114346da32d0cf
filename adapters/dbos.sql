-- DBOS's system tables (schema dbos, DBOS's default dbos_system_schema, in the harness's own database),
-- read and emptied by adapters/dbos.py. Every state change of a workflow is DBOS's own: these never
-- write a workflow row.

-- name: reset
-- Between runs: every DBOS table but its migration versions (its own; its datasource's, finish=transaction),
-- as DBOS's own truncate reset does (_sys_db_postgres.py:235, _truncate_system_database) -- without its
-- first step, which terminates every other session of the database (the runner's admin connection among
-- them).
do $$
begin
  execute (select 'truncate ' || string_agg(format('%I.%I', schemaname, tablename), ', ')
             from pg_tables where schemaname = 'dbos'
              and tablename not in ('dbos_migrations', 'dbos_datasource_migrations'));
end
$$;

-- name: pending
-- What DBOS may still act on: ENQUEUED (a queue thread will claim it), DELAYED (the background jobs
-- thread will enqueue it), PENDING (an executor runs it, or the restart of its executor recovers it:
-- _dbos.py:895-909, startup recovery of the executor id's own PENDING workflows).
select count(*)
  from pgjc.job_map m
  join dbos.workflow_status w on w.workflow_uuid = m.library_id
 where w.status in ('ENQUEUED', 'DELAYED', 'PENDING');

-- name: final_states
-- One row per schedule job: DBOS's status ('absent': no workflow row), recovery_attempts (the claims:
-- _sys_db.py start_queued_workflows adds 1 per dispatch), the error it recorded (workflow_output.error,
-- serialized by DBOS: adapters/dbos.py reads it). No lease: lease_expired is left out (None).
select m.job_id as id, coalesce(w.status, 'absent') as status, w.recovery_attempts as attempts,
       o.error as last_error
  from pgjc.job_map m
  left join dbos.workflow_status w on w.workflow_uuid = m.library_id
  left join dbos.workflow_output o on o.workflow_uuid = m.library_id
 order by m.job_id;

-- name: accepted_finishes
-- What DBOS accepted per schedule job: the workflow's terminal outcome, the one finish it records
-- (update_workflow_outcome, fenced by status = 'PENDING' and the claim's owner_xid) at completed_at
-- (epoch ms of the server's now()), and the checkpoints of its steps (operation_outputs: one row per
-- step, its output or its final error). A dead-letter (MAX_RECOVERY_ATTEMPTS_EXCEEDED) is the
-- dispatcher's, no execution's finish: recorded, not a finish.
select m.job_id as id,
       case w.status when 'SUCCESS' then 'success' when 'ERROR' then 'failure' end as outcome,
       'workflow_status ' || w.status as what, to_timestamp(w.completed_at / 1000.0) as at,
       null::int as attempt,
       format('workflow_status %s, recovery_attempts %s; operation_outputs %s ok, %s failed',
              coalesce(w.status, 'None'), coalesce(w.recovery_attempts::text, 'None'),
              (select count(*) from dbos.operation_outputs s
                where s.workflow_uuid = m.library_id and s.error is null),
              (select count(*) from dbos.operation_outputs s
                where s.workflow_uuid = m.library_id and s.error is not null)) as recorded
  from pgjc.job_map m
  left join dbos.workflow_status w on w.workflow_uuid = m.library_id
 order by m.job_id;

-- name: set_tenant
-- finish=transaction: the job's tenant, local to DBOS's datasource transaction (the worker's own tenant
-- code, adapters/dbos.py _transaction_body). Client-side literals (see own_connection.sql: observe).
select set_config({setting}, {tenant}, true);
