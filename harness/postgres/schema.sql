-- The article's database. Identifiers in {braces} are filled in by harness/postgres/dataset.py with
-- psycopg.sql.Identifier; values are %(name)s parameters.
-- The harness's tables live in a schema of their own, pgjc (dataset.SCHEMA), so that a user's design may
-- keep a table of the same name (its own jobs) in public. Every statement the harness itself sends
-- names the schema; a design's own SQL may name the article's tables bare (search_path, below).

-- name: create_schema
-- Owned by the admin role; the worker role gets usage only (grant_worker).
create schema pgjc;

-- name: create_tables
-- Tenants, their invoices, the queue and the execution counter; owned by the admin role.
create table pgjc.tenants (
    id   int primary key,
    name text not null
);
create table pgjc.invoices (
    id        bigserial primary key,
    tenant_id int not null references pgjc.tenants,
    amount    numeric(10, 2) not null
);
create index invoices_tenant on pgjc.invoices (tenant_id);
-- No tenant policy on jobs: a worker must see every job before it knows whom to become.
create table pgjc.jobs (
    id           bigint primary key,
    tenant_id    int references pgjc.tenants,
    status       text not null default 'queued'
                 check (status in ('queued', 'running', 'done', 'failed', 'dead')),
    attempts     int not null default 0,
    max_attempts int not null default 3,
    locked_until timestamptz,
    last_error   text,
    payload      jsonb not null default '{}',
    finished_at  timestamptz
);
create table pgjc.job_runs (
    id       bigserial primary key,
    job_id   bigint not null,
    worker   text not null,
    attempt  int not null,
    started  timestamptz not null default clock_timestamp(),
    finished timestamptz
);
create index job_runs_job on pgjc.job_runs (job_id);
-- A hosted library's own id of each schedule job (workers/hosted/protocol.py): ints, UUIDs, kept as text.
create table pgjc.job_map (
    job_id     bigint primary key,
    library_id text not null unique
);

-- name: load_data
-- 100 tenants; floor(20000 / tenant) invoices each: 103,707 in all.
insert into pgjc.tenants (id, name) select t, 'tenant ' || t from generate_series(1, 100) t;
insert into pgjc.invoices (tenant_id, amount)
select t, round((random() * 1000)::numeric, 2)
  from generate_series(1, 100) t, generate_series(1, 20000 / t) n;
analyze pgjc.tenants;
analyze pgjc.invoices;

-- name: enable_rls
-- Forced row-level security: even the table owner is filtered; the worker role is not the owner.
alter table pgjc.invoices enable row level security;
alter table pgjc.invoices force row level security;
create policy tenant_isolation on pgjc.invoices
    using (tenant_id = nullif(current_setting('app.tenant', true), '')::int);

-- name: tenant_policy
-- The policy reads the setting a design's tenant code sets (HostedDesign.tenant_setting; the article's
-- app.tenant unless the design names another). {setting} is a literal: a policy takes no parameters.
alter policy tenant_isolation on pgjc.invoices
    using (tenant_id = nullif(current_setting({setting}, true), '')::int);

-- name: create_worker_role
-- An ordinary login role: not the owner, not a superuser, no BYPASSRLS.
create role {worker} login password {password} nosuperuser nocreatedb nocreaterole nobypassrls;

-- name: grant_worker
-- What a worker may touch, and nothing more.
grant connect on database {database} to {worker};
grant usage on schema public, pgjc to {worker};
grant select on pgjc.tenants, pgjc.invoices to {worker};
grant select, insert, update, delete on pgjc.jobs, pgjc.job_runs to {worker};
grant select on pgjc.job_map to {worker};
grant usage on all sequences in schema pgjc to {worker};

-- name: reset_queue
-- Between runs, after many rows (harness/postgres/dataset.py: reset): empty the queue and the execution
-- counter for good -- new, empty files, no dead rows; invoices stay.
truncate pgjc.jobs, pgjc.job_runs, pgjc.job_map, pgjc.job_transitions restart identity;

-- name: reset_lock
-- Wait for every transaction that wrote or locked a row of these tables (a session of the last run's
-- that has not ended yet), and keep new writers out until the reset commits: TRUNCATE's lock did it.
lock table pgjc.jobs, pgjc.job_runs, pgjc.job_map, pgjc.job_transitions in exclusive mode;

-- name: reset_delete
-- Between runs of a few rows: the same empty tables by DELETE (a tenth of TRUNCATE's time for a
-- five-job run: TRUNCATE makes and unlinks a file per table, index and sequence) and the counters
-- back to 1, as RESTART IDENTITY does. The rows deleted, for the caller's count of dead rows.
with j as (delete from pgjc.jobs returning 1), r as (delete from pgjc.job_runs returning 1),
     m as (delete from pgjc.job_map returning 1), t as (delete from pgjc.job_transitions returning 1)
select (select count(*) from j) + (select count(*) from r) + (select count(*) from m)
       + (select count(*) from t),
       setval(pg_get_serial_sequence('pgjc.job_runs', 'id'), 1, false),
       setval(pg_get_serial_sequence('pgjc.job_transitions', 'seq'), 1, false);

-- name: final_runs
-- Every committed execution, for the history.
select job_id, worker, attempt, started, finished from pgjc.job_runs order by id;

-- name: search_path
-- Our database's default for every session that starts after it (ALTER DATABASE: sessions already open
-- keep theirs; DISCARD ALL and RESET go back to it): PostgreSQL's own default with our schema last. A
-- name a design's SQL gives bare (jobs) finds the user's table first, in public, and ours only where the
-- user has none: a user's worker written against the old layout (our tables in public) still runs; a
-- user's own jobs is never ours. CREATE DATABASE ... TEMPLATE does not copy it: a clone sets it again.
alter database {database} set search_path = "$user", public, pgjc;

-- name: resolve
-- The schema each bare name in %(names)s resolves to on this session's search_path (null: none): ours,
-- pgjc, unless a table of the user's hides it (a public.jobs) or the path lacks our schema.
select n, (select s.nspname from pg_class c join pg_namespace s on s.oid = c.relnamespace
            where c.oid = to_regclass(quote_ident(n)))
  from unnest(%(names)s::text[]) n;
