-- The fair designs' cost beside the FIFO claim (harness/bench/fairness.py).

-- name: grow_tenants
-- For the claim measurement only: tenants up to %(tenants)s (names as the dataset's); no invoices.
insert into pgjc.tenants (id, name)
select t, 'tenant ' || t from generate_series(101, %(tenants)s) t;

-- name: analyze_tenants
-- The planner sees the table as it is now, grown or shrunk.
analyze pgjc.tenants;

-- name: empty_queue
-- Before shrinking: no job may refer to a tenant about to go.
truncate pgjc.jobs, pgjc.job_runs;

-- name: shrink_tenants
-- Back to the dataset's 100 tenants.
delete from pgjc.tenants where id > 100;

-- name: tenant_count
select count(*) from pgjc.tenants;

-- name: mark_done
-- The queue's first %(done)s jobs as a drained flood leaves them: done, still in the table.
update pgjc.jobs set status = 'done', finished_at = clock_timestamp() where id <= %(done)s;

-- name: requeue
-- Put a claimed job back as it was, so that every timed claim sees the same queue.
update pgjc.jobs set status = 'queued', attempts = 0, locked_until = null where id = %(id)s;
