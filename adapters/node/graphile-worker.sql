-- graphile-worker's statements of the harness (adapters/node/graphile-worker.js sends them; contract.loadSql).
-- Placeholders, filled by the client before it sends or describes a statement (identifiers, never values):
--   {schema}  graphile's schema, "graphile_worker" (its default; GRAPHILE_WORKER_SCHEMA is not set)
--   {jobs}    the table that holds its job rows: _private_jobs since 0.16, jobs before (a table then)
--   {queues}  its named queues' table: _private_job_queues since 0.16, job_queues before
--   {deleted} the shadow table of deleted jobs, qualified by its owner's schema where it is created
--   {own}     the owner's current schema (quote_ident), where the shadow table and its trigger live
--   {role}    the worker role, a quoted identifier (install only)
-- The reads go through {schema}.jobs: its public view since 0.16, the table itself before; the columns
-- read (id, locked_at, attempts, max_attempts, last_error) are the same in both (sql/000011.sql).

-- name: reset
truncate {schema}.{jobs}, {schema}.{queues}, {deleted};

-- name: pending
-- A locked job counts: a live worker finishes it, or resetLockedAt frees a dead one's after 4 h.
select count(*) from {schema}.jobs where locked_at is not null or attempts < max_attempts;

-- name: final_states
-- A locked row is running; an unlocked one with attempts >= max_attempts failed for good (is_available,
-- sql/000011.sql); a row in the shadow table completed; in neither: missing (unmapped: unknown).
select m.library_id,
       case when j.id is not null then
              case when j.locked_at is not null then 'locked'
                   when j.attempts >= j.max_attempts then 'failed'
                   else 'waiting' end
            when d.id is not null then 'completed'
            else 'missing' end,
       coalesce(j.attempts, d.attempts)::int, j.last_error,
       case when j.locked_at is not null then j.locked_at < now() - interval '4 hours' end
  from pgjc.job_map m
  left join {schema}.jobs j on j.id::text = m.library_id
  left join {deleted} d on d.id::text = m.library_id;

-- name: accepted_finishes
-- A success is its delete (completeJob(s)), dated by the shadow table; a job it gave up on keeps its row,
-- attempts spent and unlocked, its last failure undated (failJob(s) sets no time). A job in neither
-- table: nothing recorded, no row.
select m.library_id,
       case when d.id is not null then 'success'
            when j.locked_at is null and j.attempts >= j.max_attempts then 'failure' end,
       case when d.id is not null then 'deleted (completeJobs)' else 'attempts spent (failJobs)' end,
       d.deleted_at, coalesce(d.attempts, j.attempts)::int,
       case when d.id is not null then format('deleted on success at attempt %s', d.attempts)
            when j.id is not null
            then format('jobs row, attempts %s of %s, %s, last_error %s', j.attempts, j.max_attempts,
                        case when j.locked_at is null then 'unlocked' else 'locked' end,
                        coalesce(left(j.last_error, 60), 'none'))
            else 'no row' end
  from pgjc.job_map m
  left join {schema}.jobs j on j.id::text = m.library_id
  left join {deleted} d on d.id::text = m.library_id
 where j.id is not null or d.id is not null;

-- name: owner_schema
select quote_ident(current_schema()) as s;

-- name: shadow_table
-- The shadow table and its trigger (a row trigger: truncate, the harness's reset, fires none), qualified
-- by the owner's schema. The trigger fires in the worker role's sessions and writes as its definer, the
-- owner: the worker role gets no privilege on the table.
create table if not exists {own}.{deleted} (
    id bigint primary key, attempts int not null, deleted_at timestamptz not null default now());
create or replace function {own}.{deleted}() returns trigger language plpgsql
  security definer set search_path = pg_catalog as $f$
begin
  insert into {own}.{deleted} (id, attempts) values (old.id, old.attempts)
    on conflict (id) do nothing;
  return null;
end $f$;
drop trigger if exists {deleted} on {schema}.{jobs};
create trigger {deleted} after delete on {schema}.{jobs}
  for each row execute function {own}.{deleted}();
revoke all on function {own}.{deleted}() from public;

-- name: give_schema
-- graphile's schema, its tables and views (the views since 0.16) and its functions, to the worker role.
do $$
declare r record;
begin
  execute format('alter schema {schema} owner to %s', $r${role}$r$);
  for r in select c.relname, c.relkind from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = '{schema}' and c.relkind in ('r', 'v') loop
    execute format('alter %s {schema}.%I owner to %s',
                   case r.relkind when 'v' then 'view' else 'table' end, r.relname, $r${role}$r$);
  end loop;
  for r in select p.oid::regprocedure as f from pg_proc p join pg_namespace n on n.oid = p.pronamespace
            where n.nspname = '{schema}' loop
    execute format('alter function %s owner to %s', r.f, $r${role}$r$);
  end loop;
end $$;
