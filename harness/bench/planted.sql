-- Planted bugs (harness/bench/planted.py): realistic mistakes a queue library could ship.

-- name: claim_uncounted
-- Bug: the claim does not count the attempt (it is counted when the job finishes or fails).
update jobs
   set status = 'running', locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = (select id from jobs
              where (status = 'queued' or (status = 'running' and locked_until < clock_timestamp()))
                and attempts < max_attempts
              order by id limit 1
              for update skip locked)
returning id, tenant_id, attempts + 1, payload;

-- name: finish_counting
-- Counts the attempt at the finish, fenced on the count the claim saw.
update jobs set status = 'done', locked_until = null, attempts = attempts + 1, finished_at = clock_timestamp()
 where id = %(id)s and attempts = %(attempt)s - 1 and status = 'running';

-- name: fail_counting
-- Counts the attempt at the failure.
update jobs
   set attempts = attempts + 1, locked_until = null, last_error = %(error)s,
       status = case when attempts + 1 >= max_attempts then 'dead' else 'queued' end
 where id = %(id)s;

-- name: fail_raise_limit
-- Bug: recovery gives a failing job "one more chance" by raising its limit.
update jobs
   set max_attempts = max_attempts + 1, status = 'queued', locked_until = null, last_error = %(error)s
 where id = %(id)s and attempts = %(attempt)s and status = 'running';

-- name: fail_reset_counter
-- Bug: a requeued job starts its retries afresh.
update jobs set attempts = 0, status = 'queued', locked_until = null, last_error = %(error)s
 where id = %(id)s and attempts = %(attempt)s and status = 'running';

-- name: claim_ignores_max
-- Bug: max_attempts is checked for queued jobs only; an expired lease is always claimable again.
update jobs
   set status = 'running', attempts = attempts + 1,
       locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = (select id from jobs
              where (status = 'queued' and attempts < max_attempts)
                 or (status = 'running' and locked_until < clock_timestamp())
              order by id limit 1
              for update skip locked)
returning id, tenant_id, attempts, payload;

-- name: heartbeat_any_attempt
-- Bug: the heartbeat extends the lease of whoever holds the job now.
update jobs set locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = %(id)s and status = 'running' and %(attempt)s > 0;

-- name: fail_acknowledges
-- Bug: the error handler acknowledges the job (the "done" of a queue that only knows done or not).
update jobs set status = 'done', locked_until = null, last_error = %(error)s, finished_at = clock_timestamp()
 where id = %(id)s and attempts = %(attempt)s and status = 'running';

-- name: fail_final
-- Bug: the first failure is final (no retry, whatever max_attempts says).
update jobs set status = 'dead', locked_until = null, last_error = %(error)s
 where id = %(id)s and attempts = %(attempt)s and status = 'running';

-- name: claim_pick
-- Bug, first half: read the oldest queued job (no lock), ...
select id from jobs where status = 'queued' and attempts < max_attempts order by id limit 1;

-- name: claim_by_id
-- ... second half: take it by id, without checking it is still queued (a check-then-act).
update jobs
   set status = 'running', attempts = attempts + 1, locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = %(id)s
returning id, tenant_id, attempts, payload;

-- name: claim_queued
-- A claim that takes queued jobs only: a job whose lease expired is the sweep's to put back.
update jobs
   set status = 'running', attempts = attempts + 1,
       locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = (select id from jobs where status = 'queued' and attempts < max_attempts
              order by id limit 1
              for update skip locked)
returning id, tenant_id, attempts, payload;

-- name: sweep_read
-- Bug, first half: the sweep reads the jobs whose lease expired, ...
select id, attempts, max_attempts from jobs where status = 'running' and locked_until < clock_timestamp();

-- name: sweep_write_back
-- ... second half: writes back what it decided from that read, by id, without checking the row is still
-- running with an expired lease (no compare-and-set): a job finished in between is turned back.
update jobs set status = %(status)s, locked_until = null,
       last_error = coalesce(last_error, 'lease expired')
 where id = %(id)s;
