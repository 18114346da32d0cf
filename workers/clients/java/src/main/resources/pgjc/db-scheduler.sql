-- db-scheduler's table on PostgreSQL, as its README gives it: db-scheduler/src/test/resources/postgresql_tables.sql
-- at v16.7.1 (below "name: install", with "if not exists" added: an install may run twice), then the harness's shadow of removed executions.
-- Run by pgjc.DbScheduler (workers/clients/java); {role} is the worker role, quoted.

-- name: install
create table if not exists scheduled_tasks (
  task_name text not null,
  task_instance text not null,
  task_data bytea,
  execution_time timestamp with time zone not null,
  picked BOOLEAN not null,
  picked_by text,
  last_success timestamp with time zone,
  last_failure timestamp with time zone,
  consecutive_failures INT,
  last_heartbeat timestamp with time zone,
  version BIGINT not null,
  priority SMALLINT,
  PRIMARY KEY (task_name, task_instance)
);

CREATE INDEX if not exists execution_time_idx ON scheduled_tasks (execution_time);
CREATE INDEX if not exists last_heartbeat_idx ON scheduled_tasks (last_heartbeat);
CREATE INDEX if not exists priority_execution_time_idx on scheduled_tasks (priority desc, execution_time asc);

-- A OneTimeTask's row is deleted when it completes (OnCompleteRemove) and when MaxRetriesFailureHandler
-- gives it up (ExecutionOperations.stop, the same delete): the shadow keeps each removal with the
-- row's own count of failures, as graphile's adapter keeps its deleted jobs. A removal the failure
-- handler made is marked dead by its maxRetriesExceededHandler (name: mark_dead). Truncate (the reset)
-- fires no row trigger.
create table if not exists pgjc_db_scheduler_removed (
  task_name text not null,
  task_instance text not null,
  consecutive_failures int,
  removed_at timestamptz not null default now(),
  dead boolean not null default false,
  primary key (task_name, task_instance)
);
create or replace function pgjc_db_scheduler_removed() returns trigger language plpgsql as $$
begin
  insert into pgjc_db_scheduler_removed (task_name, task_instance, consecutive_failures)
  values (old.task_name, old.task_instance, old.consecutive_failures)
  on conflict (task_name, task_instance) do update
    set consecutive_failures = excluded.consecutive_failures, removed_at = now(), dead = false;
  return old;
end $$;
drop trigger if exists pgjc_db_scheduler_removed on scheduled_tasks;
create trigger pgjc_db_scheduler_removed after delete on scheduled_tasks
  for each row execute function pgjc_db_scheduler_removed();
-- the run's threshold for a dead execution (heartbeatInterval x missedHeartbeatsLimit), written at enqueue
create table if not exists pgjc_db_scheduler_run (dead_after float8 not null);

-- name: grant
grant select, insert, update, delete on scheduled_tasks to {role};
grant select, insert, update on pgjc_db_scheduler_removed to {role};
grant select on pgjc_db_scheduler_run to {role};

-- name: reset
truncate scheduled_tasks, pgjc_db_scheduler_removed, pgjc_db_scheduler_run;

-- name: run
insert into pgjc_db_scheduler_run (dead_after) values (%(dead_after)s);

-- name: mark_dead
update pgjc_db_scheduler_removed set dead = true where task_name = %(task)s and task_instance = %(instance)s;

-- name: pending
-- A picked row counts: a live scheduler finishes it, or dead-execution detection revives it.
select count(*) from scheduled_tasks where task_name = 'pgjc';

-- name: final_states
-- (id, state, attempts, last error, lease expired): a row's attempts are its failures, and the one
-- running when picked; a removed one's its failures and the last; db-scheduler keeps no error text.
-- A picked row's heartbeat older than the run's dead_after: what detectDeadExecutions revives.
select task_instance, case when picked then 'picked' else 'scheduled' end,
       coalesce(consecutive_failures, 0) + case when picked then 1 else 0 end, null::text,
       case when picked then last_heartbeat < now() - make_interval(secs => (select max(dead_after) from pgjc_db_scheduler_run)) end
from scheduled_tasks where task_name = 'pgjc'
union all
select r.task_instance, case when r.dead then 'stopped' else 'removed' end,
       coalesce(r.consecutive_failures, 0) + 1, null::text, null::boolean
from pgjc_db_scheduler_removed r
where r.task_name = 'pgjc'
  and not exists (select 1 from scheduled_tasks s where s.task_name = r.task_name and s.task_instance = r.task_instance);

-- name: accepted_finishes
-- What db-scheduler accepted (docs/reference/contract.md), one row a finish: a success is its delete
-- (OnCompleteRemove), a give-up the failure handler's (MaxRetriesFailureHandler), both dated by the
-- shadow table on the server's clock; a row still scheduled or picked has no final finish (outcome
-- null). A failure it retried or a dead execution it revived leaves only consecutive_failures and
-- last_failure on the row, overwritten by the next: finish_history "last".
select r.task_instance, case when r.dead then 'failure' else 'success' end,
       case when r.dead then 'stopped (MaxRetriesFailureHandler)' else 'removed (OnCompleteRemove)' end,
       r.removed_at, coalesce(r.consecutive_failures, 0) + 1,
       format('row deleted at attempt %s%s', coalesce(r.consecutive_failures, 0) + 1,
              case when r.dead then ', given up' else '' end)
from pgjc_db_scheduler_removed r
where r.task_name = 'pgjc'
  and not exists (select 1 from scheduled_tasks s where s.task_name = r.task_name and s.task_instance = r.task_instance)
union all
select s.task_instance, null, null, null::timestamptz, null::int,
       format('scheduled_tasks row, %s, consecutive_failures %s', case when s.picked then 'picked' else 'not picked' end,
              coalesce(s.consecutive_failures, 0))
from scheduled_tasks s where s.task_name = 'pgjc';
