-- tests/chaos/test_awa.py's forced race of awa's stale-receipt rescue and a completion (awa-pg 0.6.9,
-- queue storage): what the test reads of awa's tables and holds of its rows.

-- name: claim
-- The job's receipt claim: its claim ring slot, run_lease, and the time the rescue's staleness runs
-- from (queue_storage.rs:10050: the attempt's heartbeat, else the claim's time).
select c.claim_slot, c.run_lease, coalesce(a.heartbeat_at, c.claimed_at) as since
  from awa.lease_claims c
  left join awa.attempt_state a on a.job_id = c.job_id and a.run_lease = c.run_lease
 where c.job_id = %(job)s;

-- name: hold_slot
-- The claim ring slot's row, locked until the holder's transaction ends: the rescue statement's first
-- CTE (cursor_row, queue_storage.rs:9924-9932) waits on it, its snapshot already taken.
select slot from awa.claim_ring_slots where slot = %(slot)s for update;

-- name: rescue_blocked
-- The leader's stale-receipt rescue statement waiting for a lock that backend %(holder)s holds: its
-- backend, and when its statement and its transaction began (its cutoff, now() - staleness, is read
-- after its BEGIN: queue_storage.rs:13034-13035).
select pid, query_start, xact_start from pg_stat_activity
 where query like '%%WITH cursor_row AS%%' and query like '%%rescue_cursor_claimed_at%%'
   and %(holder)s = any(pg_blocking_pids(pid));

-- name: cancel
-- Cancel backend %(pid)s's statement (a rescue begun before the claim went stale).
select pg_cancel_backend(%(pid)s);

-- name: stale_since
-- Whether %(since)s lies more than %(secs)s seconds back, by the database's clock.
select %(since)s < clock_timestamp() - make_interval(secs => %(secs)s);

-- name: completion_committed
-- The worker's fast receipt completion of (job, run_lease), committed
-- (complete_receipt_runtime_batch_fast, queue_storage.rs:6126).
select 1 from awa.receipt_completion_batches
 where run_leases[array_position(job_ids, %(job)s::bigint)] = %(run_lease)s;

-- name: rescue_committed
-- The rescue's closure of (job, run_lease), committed (queue_storage.rs:10214-10218).
select 1 from awa.lease_claim_closures
 where job_id = %(job)s and run_lease = %(run_lease)s and outcome = 'rescued';

-- name: states
-- awa's rows of the job: one per run_lease (awa.jobs, its compatibility view over queue storage).
select state::text, run_lease from awa.jobs where id = %(job)s order by run_lease;

-- name: evidence
-- Every record awa keeps of how the job's runs ended, in time order: the per-run closures, the
-- closure batches covering its receipts, the fast completion's batches, the done rows.
select 'lease_claim_closures ' || outcome as record, run_lease, closed_at as at
  from awa.lease_claim_closures where job_id = %(job)s
union all
select 'lease_claim_closure_batches ' || b.outcome, c.run_lease, b.closed_at
  from awa.lease_claim_closure_batches b
  join awa.lease_claims c on b.claim_slot = c.claim_slot and b.receipt_ranges @> c.receipt_id
 where c.job_id = %(job)s
union all
select 'receipt_completion_batches', run_leases[array_position(job_ids, %(job)s::bigint)], finalized_at
  from awa.receipt_completion_batches where %(job)s::bigint = any(job_ids)
union all
select 'done_entries ' || state::text, run_lease, finalized_at
  from awa.done_entries where job_id = %(job)s
order by at;
