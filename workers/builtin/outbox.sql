-- lease-outbox (workers/builtin/outbox.py): the outbox its jobs write and its relay delivers. The outbox is a
-- table of the harness's, in its schema pgjc, named with it; the queue, jobs, is named bare, as the
-- article does (the database's search_path finds it in pgjc).

-- name: create_outbox
-- One row per effect a committed execution owes the world. The key is unique: a second commit of
-- the same effect fails here even if the fence before it were wrong.
create table if not exists pgjc.outbox (
    id           bigserial primary key,
    job_id       bigint not null,
    attempt      int not null,
    idem_key     text not null unique,
    created      timestamptz not null default clock_timestamp(),
    locked_until timestamptz not null,
    deliveries   int not null default 0,
    delivered_at timestamptz
);

-- name: grant_outbox
-- The ordinary worker role (filled in with psycopg.sql.Identifier), nobody else.
grant select, insert, update on pgjc.outbox to {worker};
grant usage on sequence pgjc.outbox_id_seq to {worker};

-- name: clear_outbox
-- A fresh outbox for every run, like the queue (the runner truncates jobs and job_runs).
truncate pgjc.outbox restart identity;

-- name: insert_outbox
-- In the finishing transaction, after the fenced finish: the effect is owed only if this attempt
-- committed. The row is the execution's own relay's for a lease; after that a sweep may take it.
insert into pgjc.outbox (job_id, attempt, idem_key, locked_until, deliveries)
values (%(job)s, %(attempt)s, %(key)s, clock_timestamp() + make_interval(secs => %(lease)s), 1)
returning id;

-- name: mark_delivered
-- The world has the effect: never deliver this row again (a crash before this re-delivers it).
update pgjc.outbox set delivered_at = clock_timestamp() where id = %(id)s and delivered_at is null;

-- name: relay_claim
-- The sweep's committed claim of undelivered rows whose relay lease expired (its relay crashed,
-- hung or was cut before marking them), like a job claim.
update pgjc.outbox
   set locked_until = clock_timestamp() + make_interval(secs => %(lease)s), deliveries = deliveries + 1
 where id in (select id from pgjc.outbox
               where delivered_at is null and locked_until < clock_timestamp()
               order by id limit %(batch)s
               for update skip locked)
returning id, job_id, attempt, idem_key;

-- name: pending
-- Jobs still to finish or sweep, and effects still owed to the world.
select (select count(*) from jobs where status in ('queued', 'running'))
     + (select count(*) from pgjc.outbox where delivered_at is null);
