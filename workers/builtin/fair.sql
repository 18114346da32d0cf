-- The fair designs (workers/builtin/fair.py): lease's committed claim and finish, with the next job chosen by
-- tenant. A job's tenant key is coalesce(tenant_id, 0): a system job (no tenant) is key 0, served in
-- its own turn like a tenant. Bare names, as in lease.sql: jobs and tenants are the harness's, found
-- by the search_path.

-- name: create_turn
-- lease-round-robin's turn: the key of the tenant served last, one row. Every claim locks it, so
-- turns are taken one claim at a time across all workers (the claims, not the jobs, serialize).
create table if not exists pgjc.tenant_turn (
    one    bool primary key default true check (one),
    tenant int not null default 0
);
insert into pgjc.tenant_turn default values on conflict do nothing;

-- name: create_queue_index
-- The claimable jobs of one tenant key, oldest first: what both fair claims probe. Partial, so a probe
-- never walks a tenant's done jobs. Hazard: it stays on pgjc.jobs for every design run later on the
-- same database (status is in its predicate, so a status update there is no longer HOT).
create index if not exists jobs_tenant_queue on pgjc.jobs (coalesce(tenant_id, 0), id)
 where status in ('queued', 'running');

-- name: create_running_index
-- lease-tenant-cap's count of a tenant's live leases: the running jobs only, a handful.
create index if not exists jobs_tenant_running on pgjc.jobs (coalesce(tenant_id, 0))
 where status = 'running';

-- name: create_views
-- What every fair claim reads, defined once: a tenant key's claimable jobs (queued, or running with its
-- lease expired, attempts left) and its live leases. Plain views: the planner flattens them into each
-- claim (the same plans as the predicates written out, the partial indexes above included), and
-- `for update skip locked` through claimable_jobs locks the jobs' rows.
create or replace view pgjc.claimable_jobs as
select id, coalesce(tenant_id, 0) as tenant_key
  from pgjc.jobs
 where status in ('queued', 'running')
   and (status = 'queued' or locked_until < clock_timestamp())
   and attempts < max_attempts;
create or replace view pgjc.live_leases as
select id, coalesce(tenant_id, 0) as tenant_key
  from pgjc.jobs
 where status = 'running' and locked_until >= clock_timestamp();

-- name: grant_views
-- The ordinary worker role (filled in with psycopg.sql.Identifier): the views, to read and lock.
grant select, update on pgjc.claimable_jobs, pgjc.live_leases to {worker};

-- name: grant_turn
-- The ordinary worker role (filled in with psycopg.sql.Identifier): read and move the turn.
grant select, update on pgjc.tenant_turn to {worker};

-- name: reset_turn
-- Every run starts its turn before the first tenant (key 0 served last).
update pgjc.tenant_turn set tenant = 0;

-- name: claim_round_robin
-- One tenant at a time in turn: the first tenant key after the one served last (the tenants table in
-- id order, then key 0, then from the first tenant: the next lap) that has a claimable job gets its
-- oldest one, `for update skip locked`, and becomes the one served last. The turn row is locked first
-- and re-read at its newest version (READ COMMITTED), so concurrent claims take turns one by one.
-- Hazard: the order of the keys is the order of the union's branches (an Append runs its children in
-- order; a query that locks rows is never parallel) -- an ORDER BY over them would probe, and lock a
-- job of, every tenant. The cost: every tenant key probed before one with work, up to all of them.
-- Hazard: a worker stopped between this statement and its commit holds the turn, and every other
-- worker's claim waits (tests/chaos/test_fair.py).
with turn as (select tenant from tenant_turn for update),
picked as (
    select j.id, k.tenant
      from ((select t.id as tenant from tenants t where t.id > (select tenant from turn) order by t.id)
            union all
            select 0
            union all
            (select t.id from tenants t where t.id <= (select tenant from turn) order by t.id)) k
     cross join lateral (
            select id from claimable_jobs where tenant_key = k.tenant order by id limit 1
               for update skip locked) j
     limit 1),
moved as (update tenant_turn set tenant = (select tenant from picked) where exists (select from picked))
update jobs
   set status = 'running', attempts = attempts + 1,
       locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = (select id from picked)
returning id, tenant_id, attempts, payload;

-- name: cap_candidate
-- lease-tenant-cap, step 1: the tenant key whose oldest claimable job is the oldest among the tenants
-- holding fewer than %(cap)s live leases, leaving out the keys in %(skip)s (tried already). No row is
-- locked. The cost: one probe of each tenant key (the tenants table and key 0) in the queue index and
-- in the running index, then a sort of the heads -- it grows with the tenants, not with the queue.
select k.tenant
  from (select 0 as tenant union all select id from tenants) k
 cross join lateral (select id from claimable_jobs where tenant_key = k.tenant order by id limit 1) j
 where k.tenant <> all(%(skip)s::int[])
   and (select count(*) from live_leases r where r.tenant_key = k.tenant) < %(cap)s
 order by j.id limit 1;

-- name: cap_lock
-- Step 2: the tenant's claim lock, held to the claim's commit. Claims of one tenant take it one at a
-- time, so step 3's count sees every claim of that tenant committed before it.
select pg_try_advisory_xact_lock(%(lock_class)s::int, %(tenant)s::int);

-- name: cap_claim
-- Step 3, a new statement and so (READ COMMITTED) a new snapshot taken under the lock: the tenant's
-- oldest claimable job, `for update skip locked`, only while its live leases are fewer than %(cap)s.
-- A running job whose lease expired is claimable again and no longer counts.
update jobs
   set status = 'running', attempts = attempts + 1,
       locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = (select id from claimable_jobs where tenant_key = %(tenant)s order by id limit 1
                for update skip locked)
   and (select count(*) from live_leases where tenant_key = %(tenant)s) < %(cap)s
returning id, tenant_id, attempts, payload;
