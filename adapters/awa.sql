-- awa's documented tables, read (and, between runs, emptied) by adapters/awa.py. awa.jobs is awa's
-- compatibility view in both storages: over jobs_hot and scheduled_jobs in canonical storage, over
-- awa.jobs_compat() (ready_entries, leases/lease_claims, deferred_jobs, done_entries,
-- receipt_completion_batches) in queue storage, awa 0.6's default.

-- name: storage_state
-- awa.storage_transition_state: 'active' with current_engine 'queue_storage' once the first
-- runtime auto-finalized a fresh install (client.rs:1334-1367), 'canonical' before.
select state, current_engine from awa.storage_transition_state where singleton;

-- name: reset_canonical
-- Empty the canonical tables (a run of --design-option storage=canonical, or its leftovers before a
-- queue-storage run switches this database over).
truncate awa.jobs_hot, awa.scheduled_jobs, awa.job_unique_claims, awa.runtime_instances;

-- name: back_to_canonical
-- awa's own test isolation (awa/testing.py, AwaTestClient.clean): the storage state back to a fresh
-- install's, so that the next runtime's start decides the storage again. Only under
-- --design-option storage=canonical, before its enqueue.
update awa.storage_transition_state
   set current_engine = 'canonical', prepared_engine = null, state = 'canonical',
       transition_epoch = transition_epoch + 1, details = '{}'::jsonb, updated_at = now(), finalized_at = null
 where singleton;
delete from awa.runtime_storage_backends where backend = 'queue_storage';

-- name: pending
-- What awa's dispatch or its rescues may still act on in this run's queues (its partitions): every non-terminal state
-- of awa.jobs, and every job claimed on queue storage's receipt path, which awa.jobs does not show
-- (jobs_compat() reads ready_entries past the claim head, deferred_jobs, leases, terminal_jobs,
-- dlq_entries: a receipt claim lives in lease_claims until it materializes or closes).
with v as (select id, state from awa.jobs where queue = any(%(queues)s))
select (select count(*) from v
         where state in ('available', 'scheduled', 'retryable', 'running', 'waiting_external'))
     + (select count(distinct c.job_id) from awa.lease_claims c
         where c.queue = any(%(queues)s) and not exists (select 1 from v where v.id = c.job_id));

-- name: final_states
-- One row per schedule job: of the rows awa.jobs shows for it, the newest run_lease's (two completed
-- rows when a rescue raced a completion, awa-rescue-accepts-raced-completion.md: accepted_finishes
-- reads both); a job awa.jobs does not show but lease_claims holds is running (its
-- newest claim); in neither: absent. attempts: awa's attempt (claims, rescued ones included).
-- lease_expired: a running job whose heartbeat is older than the heartbeat staleness the workers run
-- with (%(staleness)s s), as the rescues test it: COALESCE(attempt_state.heartbeat_at, claimed_at) for a
-- receipt claim (queue_storage.rs, rescue_stale_receipt_claims_for_slot_tx).
select distinct on (m.job_id) m.job_id as id, (coalesce(j.args, r.args) ->> 'tenant')::int as tenant_id,
       coalesce(j.state::text, c.state, 'absent') as status, coalesce(j.attempt, c.attempt) as attempts,
       coalesce(to_jsonb(j.errors), r.payload -> 'errors') -> -1 ->> 'error' as last_error,
       case when coalesce(j.state::text, c.state) = 'running'
            then coalesce(j.heartbeat_at, a.heartbeat_at, c.claimed_at)
                 < now() - make_interval(secs => %(staleness)s::float8)
       end as lease_expired
  from pgjc.job_map m
  left join awa.jobs j on j.id = m.library_id::bigint
  left join lateral (select 'running' as state, lc.job_id, lc.attempt, lc.run_lease, lc.claimed_at
                       from awa.lease_claims lc
                      where j.id is null and lc.job_id = m.library_id::bigint
                      order by lc.run_lease desc limit 1) c on true
  left join awa.attempt_state a on a.job_id = c.job_id and a.run_lease = c.run_lease
  left join lateral (select re.args, re.payload from awa.ready_entries re
                      where re.job_id = m.library_id::bigint
                      order by re.ready_generation desc, re.lane_seq desc limit 1) r on true
 order by m.job_id, j.run_lease desc nulls last;

-- name: accepted_finishes
-- What awa recorded of every schedule job: its state, attempt, run_lease, finalized_at, and its
-- errors (one jsonb entry per failure or rescue: error, attempt, at; lifecycle_error in awa-model) --
-- of a job running on a receipt claim, those its newest ready row carries; clock: whose clock
-- finalized_at is on (%(clock)s: the run's storage). adapters/finishes.py reads them.
select m.job_id as id, coalesce(j.state::text, c.state) as state, coalesce(j.attempt, c.attempt) as attempt,
       coalesce(j.run_lease, c.run_lease) as run_lease, j.finalized_at,
       coalesce(to_jsonb(j.errors), r.payload -> 'errors', '[]'::jsonb) as errors, %(clock)s::text as clock
  from pgjc.job_map m
  left join awa.jobs j on j.id = m.library_id::bigint
  left join lateral (select 'running' as state, lc.attempt, lc.run_lease from awa.lease_claims lc
                      where j.id is null and lc.job_id = m.library_id::bigint
                      order by lc.run_lease desc limit 1) c on true
  left join lateral (select re.payload from awa.ready_entries re where re.job_id = m.library_id::bigint
                      order by re.ready_generation desc, re.lane_seq desc limit 1) r on true
 order by m.job_id;
