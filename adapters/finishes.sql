-- What each hosted library recorded of its finishes, read from its own tables after a run
-- (adapters/finishes.py, the adapters' accepted_finishes). Never a write.

-- name: procrastinate
-- Every event procrastinate's triggers wrote for a schedule job (schema.sql,
-- procrastinate_trigger_function_status_events_update_v1: one row per status transition, at now()),
-- in its order, with the job's final status and attempts. 'scheduled' is no transition: left out.
select m.job_id, j.status::text, j.attempts, e.type::text, e.at
  from job_map m
  join procrastinate_jobs j on j.id::text = m.library_id
  left join procrastinate_events e on e.job_id = j.id and e.type is distinct from 'scheduled'
 order by m.job_id, e.id;

-- name: pgqueuer
-- Every pgqueuer_log row of a schedule job, in its order: enqueue ('queued', no traceback), every
-- claim ('picked', re-picks included: qb.py build_dequeue_query's log_pick), every retry ('queued'
-- with a traceback: build_retry_job_query) and the finish (build_log_job_query: written only when
-- its DELETE found the row), each at now().
select m.job_id, l.status::text, l.created, l.traceback is not null
  from job_map m
  left join pgqueuer_log l on l.job_id = m.library_id::bigint
 order by m.job_id, l.id;

-- name: chancy
-- chancy's row of every schedule job: what its last accepted completion wrote (worker.py
-- Worker.flush, fenced by claim_id): state, attempts, the errors list, completed_at.
select m.job_id, j.state, j.attempts, j.max_attempts, j.errors, j.completed_at
  from job_map m
  join chancy_jobs j on j.id::text = m.library_id
 order by m.job_id;
