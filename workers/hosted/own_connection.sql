-- The job body on the worker's own connection, its tenant set by the worker's own code
-- (workers/hosted/own_connection.py).

-- name: observe
-- The body's first statement, and the job's read: what the connection carries as the job's code
-- begins (the tenant setting the worker's tenant code left, the server session) and what the job
-- can see (all visible invoices, and how many are another tenant's). It sets nothing; a connection
-- outside a transaction that is not in autocommit starts the transaction here that the job's own
-- first read would start. {setting} and {tenant} are client-side literals (psycopg.sql), not
-- parameters: a parameterized statement goes through the extended protocol, after which an idle
-- transaction still shows a backend_xmin (see body.sql).
select current_setting({setting}, true), pg_backend_pid(), count(*),
       count(*) filter (where tenant_id is distinct from {tenant}::int)
  from pgjc.invoices;

-- name: insert_finished_run
-- The execution's job_runs row, in whatever transaction the worker's code has open (autocommit: at once).
insert into pgjc.job_runs (job_id, worker, attempt, started, finished)
values ({job}, {worker}, {attempt}, {started}, clock_timestamp());
