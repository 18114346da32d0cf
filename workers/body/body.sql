-- The job body's statements, shared by every design (workers/body/execution.py). They name the harness's schema,
-- pgjc: they run on connections a design's own code may share, beside its own tables (a user's jobs).

-- name: inherited_tenant
-- What the server session carries before this job sets anything: the tenant, the marker of the
-- execution that last used this session (pgjc.last: "worker job attempt", session-level, so behind
-- a pooler it names another worker's job when the session came from one), and the session's pid.
-- Then the marker becomes ours. Materialized: the reads happen before the set_config.
-- {me} is a client-side literal (psycopg.sql), not a parameter: a parameterized statement goes
-- through the extended protocol, after which an idle transaction still shows a backend_xmin --
-- holding the horizon at a strike point where the article's plain read held none.
with before as materialized (
    select current_setting('app.tenant', true) as tenant, current_setting('pgjc.last', true) as last,
           pg_backend_pid() as pid
)
select tenant, last, pid, set_config('pgjc.last', {me}, false) from before;

-- name: server_pid
-- The server session this client is on now (behind PgBouncer the client's backend_pid is not it).
select pg_backend_pid();

-- name: set_tenant
-- Become the job's tenant; is_local true ends with the transaction, false outlives it.
select set_config('app.tenant', %(tenant)s, %(local)s);

-- name: insert_run
-- One row per execution, written when it starts (inside whatever transaction is open).
insert into pgjc.job_runs (job_id, worker, attempt) values (%(job)s, %(worker)s, %(attempt)s) returning id;

-- name: insert_finished_run
-- lease-heartbeat writes its row at the end, in the short finishing transaction.
insert into pgjc.job_runs (job_id, worker, attempt, started, finished)
values (%(job)s, %(worker)s, %(attempt)s, %(started)s, clock_timestamp());

-- name: finish_run
-- Close this execution's row.
update pgjc.job_runs set finished = clock_timestamp() where id = %(run)s;

-- name: read_invoices
-- What the job can see: all visible invoices, and how many of them are another tenant's.
select count(*), count(*) filter (where tenant_id is distinct from %(tenant)s::int) from pgjc.invoices;
