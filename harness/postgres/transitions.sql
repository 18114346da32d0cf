-- The jobs table's status changes as they commit (harness/postgres/transitions.py): what the
-- success-final property reads besides the final table. A rolled-back change leaves no row.

-- name: install
-- A log of every status a job takes -- its enqueue, then each change -- with the time, the transaction,
-- the session and the statement that made it. The trigger's function runs as its owner (the admin role),
-- so the worker role needs no grant on the log, and the design's statements stay as they are.
create table pgjc.job_transitions (
    seq      bigserial primary key,
    job_id   bigint not null,
    old      text,
    status   text not null,
    attempts int,
    at       timestamptz not null default clock_timestamp(),
    xact     xid8 not null default pg_current_xact_id(),
    backend  int not null default pg_backend_pid(),
    query    text
);
create function pgjc.log_job_transition() returns trigger
    language plpgsql security definer set search_path = pg_catalog, pgjc as $fn$
begin
    if tg_op = 'INSERT' or new.status is distinct from old.status then
        insert into pgjc.job_transitions (job_id, old, status, attempts, query)
        values (new.id, case when tg_op = 'UPDATE' then old.status end, new.status, new.attempts,
                left(current_query(), 300));
    end if;
    return null;
end
$fn$;
create trigger log_job_transition after insert or update of status on pgjc.jobs
    for each row execute function pgjc.log_job_transition();

-- name: read
-- Every committed status change, in the order the trigger logged them.
select seq, job_id, old, status, attempts, at, xact::text, backend, query
  from pgjc.job_transitions order by seq;
