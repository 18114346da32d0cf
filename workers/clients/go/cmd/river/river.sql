-- The harness's SQL for River (cmd/river, embedded; sent by the command's install and given to the harness in
-- its descriptor). River's own tables are its migrations' (rivermigrate); these statements only read them,
-- and the install adds one table of the harness's: what River accepted, one row each time a job left
-- 'running' (adapters/river.py says why the river_job row alone cannot tell).

-- name: install
-- Every finish River accepts is an UPDATE of a 'running' river_job row: the completer's and JobCompleteTx's
-- JobSetStateIfRunningMany (riverpgxv5 internal/dbsqlc/river_job.sql:643-722, "WHERE ... river_job.state =
-- 'running'") and the rescuer's JobRescueMany (river_job.sql:494-521, "AND river_job.state = 'running'").
-- The row trigger keeps each one with the server's clock_timestamp() at that UPDATE (the acceptance, not the
-- finalized_at River stamps from the worker's clock when Work returned), the state it set, the attempt of the
-- error it appended, if any (the errored execution's own job.Attempt, or the rescued row's), and that error's
-- first words. Its xmin is the accepting transaction's: JobCompleteTx's is the body's finishing transaction,
-- which inserted the execution's pgjc.job_runs row too. Truncate (the reset) fires no row trigger.
create table if not exists pgjc_river_finish (
  seq bigserial primary key,
  job_id bigint not null,
  state text not null,
  error_attempt int,
  error text,
  at timestamptz not null default clock_timestamp()
);
create or replace function pgjc_river_finish() returns trigger language plpgsql as $$
declare
  appended jsonb;
begin
  if coalesce(array_length(new.errors, 1), 0) > coalesce(array_length(old.errors, 1), 0) then
    appended := new.errors[array_length(new.errors, 1)];
  end if;
  insert into pgjc_river_finish (job_id, state, error_attempt, error)
  values (new.id, new.state::text, (appended->>'attempt')::int, left(appended->>'error', 80));
  return null;
end $$;
drop trigger if exists pgjc_river_finish on river_job;
create trigger pgjc_river_finish after update on river_job
  for each row when (old.state = 'running' and new.state <> 'running')
  execute function pgjc_river_finish();

-- name: accepted_finishes
-- What River accepted (docs/reference/contract.md), one row a finish, in the order River took them:
-- (queue id, outcome, River's name for it, at, attempt, what its tables recorded).
-- completed: a success. Through JobCompleteTx its UPDATE ran in the body's finishing transaction, before
-- that transaction's commit and the body's end: undated (a date before the end would be taken for an
-- earlier execution's), attributed by the job_runs row the same transaction inserted (same xmin). Through
-- the completer: dated at the UPDATE (the server's clock), attributed by the harness to the execution that
-- returned last before it.
-- Any appended error but the rescuer's: a failure (retryable, available or discarded), dated at the UPDATE.
-- The rescuer's ("Stuck job rescued by JobRescuer") is left out: it is River's recovery of a running
-- attempt, no execution's finish -- attributed, it would be taken for the last failed execution before it
-- (one whose own failure River refused after an earlier rescue) and judged a stale finish. It is counted in
-- the record's text.
-- A job with no finish: one row, outcome null.
select j.id::text,
       case when f.seq is null then null
            when f.state = 'completed' then 'success'
            when f.error is not null or f.state in ('discarded', 'cancelled') then 'failure'
            else 'requeued' end,
       case when f.seq is null then null
            when f.state = 'completed' and r.attempt is not null then 'completed (JobCompleteTx)'
            when f.state = 'completed' then 'completed (completer)'
            when f.error is not null then 'errored -> ' || f.state
            else 'no error -> ' || f.state end,
       case when f.state = 'completed' and r.attempt is not null then null else f.at end,
       case when f.state = 'completed' then r.attempt else f.error_attempt end,
       format('river_job state %s, attempt %s, %s errors; left running %s times (%s)', j.state, j.attempt,
              coalesce(array_length(j.errors, 1), 0),
              (select count(*) from pgjc_river_finish c where c.job_id = j.id),
              (select string_agg(c.state || coalesce(' #' || c.error_attempt, '')
                                 || case when c.error like 'Stuck job rescued by JobRescuer%' then ' (rescued)'
                                         else '' end, ', ' order by c.seq)
                 from pgjc_river_finish c where c.job_id = j.id))
from river_job j
left join pgjc_river_finish f
  on f.job_id = j.id and (f.error like 'Stuck job rescued by JobRescuer%') is not true
left join lateral (select min(x.attempt) as attempt from pgjc.job_runs x
                   where x.xmin = f.xmin and f.state = 'completed') r on true
where j.kind = 'pgjc'
order by j.id, f.seq;
