'use strict';
/**
 * graphile-worker (graphile/worker, npm graphile-worker 0.17.3: runs on Node 20, engines node >= 14)
 * through the worker contract (docs/reference/contract.md); the Python side is adapters/graphile.py.
 *
 * What runs is graphile-worker's own code, configured as its README does: runMigrations(options)
 * installs its schema; makeWorkerUtils(options).addJob(task, payload, {maxAttempts}) queues (no
 * queueName, no jobKey: the README's default, jobs not serialised, none replaced); run({taskList})
 * works, at its default concurrency (concurrentJobs 1), polling every pollInterval and woken by its
 * LISTEN on jobs:insert. The task is the harness's job body, told job.attempts (incremented by the
 * fetch itself, dist/sql/getJobs.js). Intervals keep the ratios of its documented defaults
 * (adapters/graphile.py: TIMING); the lock timeout that frees a dead worker's job is 4 hours in its
 * SQL (dist/sql/resetLockedAt.js), not a setting.
 */
const { EventEmitter } = require('node:events');
const { Logger, makeWorkerUtils, run, runMigrations } = require('graphile-worker');
const contract = require('pgjc-contract');

const TASK = 'pgjc';
const SCHEMA = 'graphile_worker'; // its default (dist/config.js); GRAPHILE_WORKER_SCHEMA is not set
const URL = process.env.DATABASE_URL;

// Its logs on stderr: stdout carries the contract's answers.
const logger = new Logger(() => (level, message) => {
  if (level !== 'debug') process.stderr.write(`graphile-worker ${level}: ${message}\n`);
});

function options(extra = {}) {
  return { connectionString: URL, schema: SCHEMA, logger, ...extra };
}

// Read through its jobs view, its public interface (docs: "Database schema"). graphile deletes a job
// when it succeeds (dist/sql/completeJobs.js) and, here, at no other time (no jobKey, no admin
// function called); its count goes with the row. So the install keeps a shadow table of deleted jobs,
// the harness's own instrumentation (graphile keeps no record of a completed job): an AFTER DELETE
// trigger copies the row's own attempts at its deletion (never the harness's count). A mapped job in
// neither table is 'missing', a state the harness does not map: the properties that read it say
// unknown. A locked row is running; an unlocked one with attempts >= max_attempts failed for good
// (is_available, sql/000011.sql:67).
const DELETED = 'pgjc_graphile_deleted'; // in the owner's current schema (public; job_map is in pgjc)
const FINAL_STATES = `
  select m.library_id,
         case when j.id is not null then
                case when j.locked_at is not null then 'locked'
                     when j.attempts >= j.max_attempts then 'failed'
                     else 'waiting' end
              when d.id is not null then 'completed'
              else 'missing' end,
         coalesce(j.attempts, d.attempts)::int, j.last_error,
         case when j.locked_at is not null then j.locked_at < now() - interval '4 hours' end
    from pgjc.job_map m
    left join ${SCHEMA}.jobs j on j.id::text = m.library_id
    left join ${DELETED} d on d.id::text = m.library_id`;

// What graphile accepted (docs/reference/contract.md): a success is its delete (completeJobs), dated
// by the shadow table; a job it gave up on keeps its row, attempts spent and unlocked, its last
// failure undated (failJobs sets no time; its attempt is the row's attempts, as getJobs counted it).
// The failures it retried leave only last_error: no row of their own.
const ACCEPTED_FINISHES = `
  select m.library_id,
         case when d.id is not null then 'success'
              when j.locked_at is null and j.attempts >= j.max_attempts then 'failure' end,
         case when d.id is not null then 'deleted (completeJobs)' else 'attempts spent (failJobs)' end,
         d.deleted_at, coalesce(d.attempts, j.attempts)::int,
         case when d.id is not null then format('deleted on success at attempt %s', d.attempts)
              when j.id is not null
              then format('jobs row, attempts %s of %s, %s, last_error %s', j.attempts, j.max_attempts,
                          case when j.locked_at is null then 'unlocked' else 'locked' end,
                          coalesce(left(j.last_error, 60), 'none'))
              else 'no row' end
    from pgjc.job_map m
    left join ${SCHEMA}.jobs j on j.id::text = m.library_id
    left join ${DELETED} d on d.id::text = m.library_id
   where j.id is not null or d.id is not null`; // a job in neither table: nothing recorded, no row

const commands = {
  describe() {
    contract.emit({
      kind: 'descriptor', contract: contract.CONTRACT, system: 'graphile-worker',
      version: require('graphile-worker/package.json').version, runtime: `node ${process.versions.node}`,
      status: { waiting: 'queued', locked: 'running', completed: 'done', failed: 'dead' },
      finish_history: 'last', // a retried failure leaves only last_error
      sql: {
        reset: `truncate ${SCHEMA}._private_jobs, ${SCHEMA}._private_job_queues, ${DELETED}`,
        // A locked job counts: a live worker finishes it, or resetLockedAt frees a dead one's after 4 h.
        pending: `select count(*) from ${SCHEMA}.jobs where locked_at is not null or attempts < max_attempts`,
        final_states: FINAL_STATES,
        accepted_finishes: ACCEPTED_FINISHES,
      },
    });
  },
  async install() {
    await runMigrations(options()); // its own migrations create its schema
    const role = '"' + process.env.PGJC_WORKER_ROLE.replace(/"/g, '""') + '"';
    const pg = require('pg');
    const conn = new pg.Client({ connectionString: URL });
    await conn.connect();
    // graphile's worker is the owner of its schema: run() migrates it at every start (runner.js ->
    // migrate.js), and its tables enable row level security with no policy (sql/000001.sql:9,24,
    // 000011.sql:42-69), so only their owner reads them. The ordinary worker role gets that ownership
    // (the tables' sequences follow them), never BYPASSRLS: the harness's own tables stay as they are.
    // The shadow table and its trigger (a row trigger: truncate, the harness's reset, fires none),
    // qualified by the owner's schema. The trigger fires in the worker role's sessions and writes as
    // its definer, the owner: the worker role gets no privilege on the table.
    const own = (await conn.query('select quote_ident(current_schema()) as s')).rows[0].s;
    await conn.query(`create table if not exists ${own}.${DELETED} (
        id bigint primary key, attempts int not null, deleted_at timestamptz not null default now());
      create or replace function ${own}.${DELETED}() returns trigger language plpgsql
        security definer set search_path = pg_catalog as $f$
      begin
        insert into ${own}.${DELETED} (id, attempts) values (old.id, old.attempts)
          on conflict (id) do nothing;
        return null;
      end $f$;
      drop trigger if exists ${DELETED} on ${SCHEMA}._private_jobs;
      create trigger ${DELETED} after delete on ${SCHEMA}._private_jobs
        for each row execute function ${own}.${DELETED}();
      revoke all on function ${own}.${DELETED}() from public`);
    await conn.query(`do $$
      declare r record;
      begin
        execute format('alter schema ${SCHEMA} owner to %s', $r$${role}$r$);
        for r in select c.relname, c.relkind from pg_class c join pg_namespace n on n.oid = c.relnamespace
                  where n.nspname = '${SCHEMA}' and c.relkind in ('r', 'v') loop
          execute format('alter %s ${SCHEMA}.%I owner to %s',
                         case r.relkind when 'v' then 'view' else 'table' end, r.relname, $r$${role}$r$);
        end loop;
        for r in select p.oid::regprocedure as f from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                  where n.nspname = '${SCHEMA}' loop
          execute format('alter function %s owner to %s', r.f, $r$${role}$r$);
        end loop;
      end $$`);
    await conn.end();
    contract.emit({ kind: 'installed' });
  },
  async enqueue() {
    const req = contract.readStdin();
    const utils = await makeWorkerUtils(options());
    const fairness = (req.options || {}).fairness || 'off';
    if (!['off', 'per-tenant-queue'].includes(fairness)) throw new Error(`fairness=${fairness}`);
    const ids = [];
    try {
      for (const args of req.jobs) {
        // maxAttempts: executions in all, the first included (its add_job default is 25)
        // fairness=per-tenant-queue: queueName per tenant, graphile's documented way to run a
        // queue's jobs in series (interfaces.d.ts, TaskSpec.queueName: "only specify if you want jobs
        // in this queue to run serially"): one tenant holds at most one job at a time.
        const queueName = fairness === 'per-tenant-queue' ? `tenant_${args.tenant}` : undefined;
        const job = await utils.addJob(TASK, args, { maxAttempts: req.max_attempts, queueName });
        ids.push([args.job, String(job.id)]);
      }
    } finally {
      await utils.release();
    }
    contract.emit({ kind: 'enqueued', ids });
  },
  async work() {
    const client = new contract.Client();
    client.watchStatements(); // graphile's own statements are strike points too
    const t = client.intervals;
    const events = new EventEmitter();
    let runner = null;
    let stopping = null;
    // The dequeue budget: 'job:complete' is emitted before the worker fetches its next job
    // (dist/worker.js: safeEmit, then `if (active) doNext()`), and runner.stop()'s graceful shutdown
    // releases the worker (active = false) before its first await: no job is taken past the budget.
    events.on('job:complete', () => {
      if (!client.mayDequeue() && runner && !stopping) stopping = runner.stop();
    });
    runner = await run(options({
      events,
      pollInterval: t['poll interval'] * 1000,
      minResetLockedInterval: t['min reset locked interval'] * 1000,
      maxResetLockedInterval: t['max reset locked interval'] * 1000,
      taskList: { [TASK]: async (payload, helpers) => client.runJob(payload, helpers.job.attempts) },
    }));
    if (!client.mayDequeue() && !stopping) stopping = runner.stop(); // a budget of 0
    await runner.promise;
    if (stopping) await stopping;
  },
};

contract.main(commands);
