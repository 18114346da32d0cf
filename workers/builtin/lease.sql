-- The lease designs (workers/builtin/lease.py, workers/builtin/heartbeat.py).

-- name: claim
-- The article's committed claim: the attempt is counted before the work starts, so a crash
-- cannot undo it; an expired lease makes a running job claimable again while attempts remain.
update jobs
   set status = 'running', attempts = attempts + 1,
       locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = (select id from jobs
              where (status = 'queued'
                     or (status = 'running' and locked_until < clock_timestamp()))
                and attempts < max_attempts
              order by id limit 1
              for update skip locked)
returning id, tenant_id, attempts, payload;

-- name: finish
-- Unfenced: a late worker whose lease was taken over still marks the job done.
update jobs set status = 'done', locked_until = null, finished_at = clock_timestamp()
 where id = %(id)s;

-- name: finish_fenced
-- The fence: finish only if the row still carries the attempt this worker claimed. A worker
-- whose lease expired and was re-claimed matches no row, and its transaction rolls back.
update jobs set status = 'done', locked_until = null, finished_at = clock_timestamp()
 where id = %(id)s and attempts = %(attempt)s and status = 'running';

-- name: fail
-- After an error: back to the queue, or dead when no attempt is left.
update jobs
   set status = case when attempts >= max_attempts then 'dead' else 'queued' end,
       locked_until = null, last_error = %(error)s
 where id = %(id)s;

-- name: fail_fenced
-- The same, only for the attempt this worker claimed.
update jobs
   set status = case when attempts >= max_attempts then 'dead' else 'queued' end,
       locked_until = null, last_error = %(error)s
 where id = %(id)s and attempts = %(attempt)s and status = 'running';

-- name: heartbeat
-- Extend the lease, only for the attempt this worker claimed; no row means the lease is lost.
update jobs set locked_until = clock_timestamp() + make_interval(secs => %(lease)s)
 where id = %(id)s and attempts = %(attempt)s and status = 'running';

-- name: sweep
-- Mark dead what is running with an expired lease and no attempt left (the article's suggestion).
update jobs set status = 'dead', last_error = coalesce(last_error, 'lease expired at max_attempts')
 where status = 'running' and locked_until < clock_timestamp() and attempts >= max_attempts;
