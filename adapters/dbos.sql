-- DBOS's system tables (schema dbos, DBOS's default dbos_system_schema, in the harness's own database),
-- read and emptied by adapters/dbos.py. Every state change of a workflow is DBOS's own: these never
-- write a workflow row.

-- name: reset
-- Between runs: every DBOS table but its migration version, as DBOS's own truncate reset does
-- (_sys_db_postgres.py:235, _truncate_system_database) -- without its first step, which terminates every
-- other session of the database (the runner's admin connection among them).
do $$
begin
  execute (select 'truncate ' || string_agg(format('%I.%I', schemaname, tablename), ', ')
             from pg_tables where schemaname = 'dbos' and tablename <> 'dbos_migrations');
end
$$;

-- name: pending
-- What DBOS may still act on: ENQUEUED (a queue thread will claim it), DELAYED (the background jobs
-- thread will enqueue it), PENDING (an executor runs it, or the restart of its executor recovers it:
-- _dbos.py:895-909, startup recovery of the executor id's own PENDING workflows).
select count(*)
  from job_map m
  join dbos.workflow_status w on w.workflow_uuid = m.library_id
 where w.status in ('ENQUEUED', 'DELAYED', 'PENDING');

-- name: final_states
-- One row per schedule job: DBOS's status, recovery_attempts (the claims: _sys_db.py start_queued_workflows
-- adds 1 per dispatch), the error it recorded (workflow_output.error, serialized by DBOS), the executor.
select m.job_id, w.status, w.recovery_attempts, o.error, w.executor_id
  from job_map m
  left join dbos.workflow_status w on w.workflow_uuid = m.library_id
  left join dbos.workflow_output o on o.workflow_uuid = m.library_id
 order by m.job_id;

-- name: finishes
-- What DBOS accepted per schedule job: the workflow's terminal outcome (update_workflow_outcome, fenced by
-- status = 'PENDING' and the claim's owner_xid) at completed_at (epoch ms of the server's now()), and the
-- checkpoints of its steps (operation_outputs: one row per step, its output or its final error).
select m.job_id, w.status, w.recovery_attempts, w.completed_at,
       (select count(*) from dbos.operation_outputs s
         where s.workflow_uuid = m.library_id and s.error is null) as steps_ok,
       (select count(*) from dbos.operation_outputs s
         where s.workflow_uuid = m.library_id and s.error is not null) as steps_failed
  from job_map m
  left join dbos.workflow_status w on w.workflow_uuid = m.library_id
 order by m.job_id;
