-- The article's database. Identifiers in {braces} are filled in by harness/postgres/dataset.py with
-- psycopg.sql.Identifier; values are %(name)s parameters.

-- name: create_tables
-- Tenants, their invoices, the queue and the execution counter; owned by the admin role.
create table tenants (
    id   int primary key,
    name text not null
);
create table invoices (
    id        bigserial primary key,
    tenant_id int not null references tenants,
    amount    numeric(10, 2) not null
);
create index invoices_tenant on invoices (tenant_id);
-- No tenant policy on jobs: a worker must see every job before it knows whom to become.
create table jobs (
    id           bigint primary key,
    tenant_id    int references tenants,
    status       text not null default 'queued'
                 check (status in ('queued', 'running', 'done', 'failed', 'dead')),
    attempts     int not null default 0,
    max_attempts int not null default 3,
    locked_until timestamptz,
    last_error   text,
    payload      jsonb not null default '{}',
    finished_at  timestamptz
);
create table job_runs (
    id       bigserial primary key,
    job_id   bigint not null,
    worker   text not null,
    attempt  int not null,
    started  timestamptz not null default clock_timestamp(),
    finished timestamptz
);
create index job_runs_job on job_runs (job_id);
-- A hosted library's own id of each schedule job (workers/hosted/protocol.py): ints, UUIDs, kept as text.
create table job_map (
    job_id     bigint primary key,
    library_id text not null unique
);

-- name: load_data
-- 100 tenants; floor(20000 / tenant) invoices each: 103,707 in all.
insert into tenants (id, name) select t, 'tenant ' || t from generate_series(1, 100) t;
insert into invoices (tenant_id, amount)
select t, round((random() * 1000)::numeric, 2)
  from generate_series(1, 100) t, generate_series(1, 20000 / t) n;
analyze tenants;
analyze invoices;

-- name: enable_rls
-- Forced row-level security: even the table owner is filtered; the worker role is not the owner.
alter table invoices enable row level security;
alter table invoices force row level security;
create policy tenant_isolation on invoices
    using (tenant_id = nullif(current_setting('app.tenant', true), '')::int);

-- name: tenant_policy
-- The policy reads the setting a design's tenant code sets (HostedDesign.tenant_setting; the article's
-- app.tenant unless the design names another). {setting} is a literal: a policy takes no parameters.
alter policy tenant_isolation on invoices
    using (tenant_id = nullif(current_setting({setting}, true), '')::int);

-- name: create_worker_role
-- An ordinary login role: not the owner, not a superuser, no BYPASSRLS.
create role {worker} login password {password} nosuperuser nocreatedb nocreaterole nobypassrls;

-- name: grant_worker
-- What a worker may touch, and nothing more.
grant connect on database {database} to {worker};
grant usage on schema public to {worker};
grant select on tenants, invoices to {worker};
grant select, insert, update, delete on jobs, job_runs to {worker};
grant select on job_map to {worker};
grant usage on all sequences in schema public to {worker};

-- name: reset_queue
-- Between runs: empty the queue and the execution counter; invoices stay.
truncate jobs, job_runs, job_map restart identity;

-- name: final_runs
-- Every committed execution, for the history.
select job_id, worker, attempt, started, finished from job_runs order by id;
