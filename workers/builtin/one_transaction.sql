-- The article's most common design: the row lock is the claim (workers/builtin/one_transaction.py).

-- name: claim
-- Lock the oldest queued job for the rest of this transaction; others skip it.
select id, tenant_id, attempts, payload
  from jobs
 where status = 'queued'
 order by id
 limit 1
   for update skip locked;

-- name: count_attempt
-- Counted inside the work transaction: a rollback takes the count back with everything else.
update jobs set attempts = attempts + 1 where id = %(id)s;

-- name: finish
-- Done, in the same transaction as the work.
update jobs set status = 'done', finished_at = clock_timestamp() where id = %(id)s;

-- name: count_failure
-- The error handler's own transaction: count the failed attempt, dead at max_attempts.
update jobs
   set attempts = attempts + 1,
       last_error = %(error)s,
       status = case when attempts + 1 >= max_attempts then 'dead' else 'queued' end
 where id = %(id)s;
