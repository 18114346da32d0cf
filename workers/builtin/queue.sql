-- Statements every built-in design shares (workers/builtin/base.py).

-- name: enqueue
-- One job, in queue order; the payload carries its duration and the fault it carries.
insert into jobs (id, tenant_id, max_attempts, payload) values (%(id)s, %(tenant)s, %(max_attempts)s, %(payload)s);

-- name: final_states
-- The queue as a run left it.
select id, tenant_id, status, attempts, max_attempts, last_error,
       locked_until is not null and locked_until < clock_timestamp() as lease_expired
  from jobs order by id;
