-- awa's documented tables, read and written by adapters/awa.py. awa's canonical storage (what
-- Client.migrate leaves: awa.storage_status() 'canonical'): awa.jobs is the view over jobs_hot (running,
-- available, terminal) and scheduled_jobs (scheduled, retryable).

-- name: insert_job
-- The statement awa's own insert sends (awa-model/src/insert.rs:11, v0.6.5): awa.insert_job_compat,
-- here on the runner's transaction (an awa Client in the runner's process would start its Tokio
-- runtime there, and the forked workers would inherit it dead).
select id from awa.insert_job_compat(%(kind)s, %(queue)s, %(args)s, 'available'::awa.job_state,
                                     2::smallint, %(max_attempts)s::smallint);

-- name: reset
truncate awa.jobs_hot, awa.scheduled_jobs, awa.job_unique_claims, awa.dlq_entries, awa.runtime_instances;

-- name: pending
-- What awa's dispatch or its rescues may still act on: every non-terminal state (a running job is
-- a worker's, or the heartbeat/deadline rescue's once stale).
select count(*) from awa.jobs
 where queue = %(queue)s and state in ('available', 'scheduled', 'retryable', 'running', 'waiting_external');

-- name: final_states
-- One row per schedule job; lease_expired: a running job whose heartbeat_at is older than the
-- heartbeat staleness the workers run with (%(staleness)s seconds) -- what rescue_stale_heartbeats tests.
select m.job_id, (j.args ->> 'tenant')::int, j.state::text, j.attempt, j.errors[cardinality(j.errors)] ->> 'error',
       case when j.state = 'running'
            then j.heartbeat_at < now() - make_interval(secs => %(staleness)s::float8) end
  from job_map m
  left join awa.jobs j on j.id = m.library_id::bigint
 order by m.job_id;
