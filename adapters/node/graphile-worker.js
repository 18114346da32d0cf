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
 * SQL (dist/sql/resetLockedAt.js), not a setting. Before 0.16 (the corpus's 0.14.0-rc.0 and 0.15.x) the
 * job rows live in the jobs table itself: LEGACY below. The harness's statements: graphile-worker.sql.
 */
const { EventEmitter } = require('node:events');
const path = require('node:path');
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

// graphile deletes a job when it succeeds (completeJob(s)) and, here, at no other time (no jobKey, no
// admin function called); its count goes with the row. So the install keeps a shadow table of deleted
// jobs, the harness's own instrumentation (graphile keeps no record of a completed job): an AFTER DELETE
// trigger on the table of its job rows copies the row's own attempts at its deletion (never the
// harness's count). A mapped job in neither table is 'missing', a state the harness does not map: the
// properties that read it say unknown. The statements: graphile-worker.sql beside this file.
const DELETED = 'pgjc_graphile_deleted'; // in the owner's current schema (public; job_map is in pgjc)

// Versions (issue 48: the corpus runs older ones beside the pinned one). Since 0.16 the job rows live
// in _private_jobs / _private_job_queues behind the public jobs view (sql/000015.sql); before (0.14 and
// 0.15, sql/000011.sql) jobs and job_queues are the tables themselves, with the same columns read here.
// Everything else this client uses is the same API in both: runMigrations, makeWorkerUtils().addJob,
// run({taskList, events, pollInterval, min/maxResetLockedInterval}), 'job:complete', runner.stop().
const VERSION = require('graphile-worker/package.json').version;

/** Whether graphile-worker `version` keeps its jobs in the pre-0.16 tables (no _private_ tables). */
function legacy(version) {
  const [major, minor] = String(version).split(/[.-]/).map(Number);
  return major === 0 && minor < 16;
}

const LEGACY = legacy(VERSION);
const NAMES = {
  schema: SCHEMA, deleted: DELETED,
  jobs: LEGACY ? 'jobs' : '_private_jobs',
  queues: LEGACY ? 'job_queues' : '_private_job_queues',
};
const RAW = contract.loadSql(path.join(__dirname, 'graphile-worker.sql'));

/** Statement `name` of graphile-worker.sql with its {placeholders} filled from NAMES and `extra`. */
function sql(name, extra = {}) {
  const names = { ...NAMES, ...extra };
  return RAW[name].replace(/\{(\w+)\}/g, (m, k) => {
    if (!(k in names)) throw new Error(`graphile-worker.sql ${name}: no value for {${k}}`);
    return names[k];
  });
}

const commands = {
  describe() {
    contract.emit({
      kind: 'descriptor', contract: contract.CONTRACT, system: 'graphile-worker',
      version: VERSION, runtime: `node ${process.versions.node}`,
      status: { waiting: 'queued', locked: 'running', completed: 'done', failed: 'dead' },
      finish_history: 'last', // a retried failure leaves only last_error
      sql: {
        reset: sql('reset'),
        pending: sql('pending'),
        final_states: sql('final_states'),
        accepted_finishes: sql('accepted_finishes'),
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
    // 000011.sql:41-68), so only their owner reads them. The ordinary worker role gets that ownership
    // (the tables' sequences follow them), never BYPASSRLS: the harness's own tables stay as they are.
    const own = (await conn.query(sql('owner_schema'))).rows[0].s;
    await conn.query(sql('shadow_table', { own }));
    await conn.query(sql('give_schema', { role }));
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
    const contractListeners = new Set(process.listeners('SIGTERM')); // the contract client's own
    runner = await run(options({
      events,
      pollInterval: t['poll interval'] * 1000,
      minResetLockedInterval: t['min reset locked interval'] * 1000,
      maxResetLockedInterval: t['max reset locked interval'] * 1000,
      taskList: { [TASK]: async (payload, helpers) => client.runJob(payload, helpers.job.attempts) },
    }));
    if (!client.mayDequeue() && !stopping) stopping = runner.stop(); // a budget of 0
    // graphile's own SIGTERM handler (run() registers it: noHandleSignals false) ends by removing itself
    // and process.kill(process.pid, signal), "killing self via SIGTERM" (0.14.0-rc.0/0.15.0
    // dist/main.js:66-69; 0.15.1 src/main.ts:125-133; 0.17.3 dist/main.js:112-118): in its users'
    // processes no listener is left then, and Node's default ends the process by the signal. The contract
    // client's listener (pgjc-contract.js, for queues with no handler of their own) would swallow that
    // signal and let the process run on. So a SIGTERM that finds none of graphile's handlers registered
    // (nor any other but the contract's) ends the process as Node's default would.
    const graphiles = () => process.listeners('SIGTERM').filter((l) => !contractListeners.has(l) && l !== selfKill);
    function selfKill() {
      if (graphiles().length > 0) return; // graphile's handler is there, and runs: its first signal
      process.stderr.write('pgjc graphile-worker: SIGTERM with no graphile handler left: Node\'s default\n');
      process.removeAllListeners('SIGTERM');
      process.kill(process.pid, 'SIGTERM');
    }
    if (graphiles().length > 0) process.on('SIGTERM', selfKill); // registered after graphile's
    await runner.promise;
    if (stopping) await stopping;
  },
};

contract.main(commands);
