'use strict';
/**
 * pg-boss (timgit/pg-boss, npm pg-boss 10.4.2: the last major line that runs on Node 20) through the
 * worker contract (docs/contract.md); the Python side is adapters/pgboss.py.
 *
 * What runs is pg-boss's own code, configured as its README does: new PgBoss(url), start() (its
 * migrations, and its maintenance: supervise, every maintenanceIntervalSeconds, which fails or
 * retries an active job past its expiration, failJobsByTimeout), createQueue(name), send(name, data,
 * {retryLimit}), work(name, handler) -- one job at a time (batchSize 1, its default), polled every
 * pollingIntervalSeconds. The handler is the harness's job body. Intervals keep the ratios of
 * pg-boss's documented defaults (adapters/pgboss.py: TIMING), the schedule's lease as the 15 minute
 * expiration; includeMetadata: true only reads retryCount, the attempt the body is told.
 */
const PgBoss = require('pg-boss');
const contract = require('pgjc-contract');

const QUEUE = 'pgjc';
const SCHEMA = 'pgboss';
const URL = process.env.DATABASE_URL;

function boss(extra = {}) {
  const b = new PgBoss({ connectionString: URL, ...extra });
  b.on('error', (err) => process.stderr.write(`pg-boss error: ${err && err.stack ? err.stack : err}\n`));
  return b;
}

const commands = {
  describe() {
    const version = require('pg-boss/package.json').version;
    contract.emit({
      kind: 'descriptor', contract: contract.CONTRACT, system: 'pg-boss', version,
      runtime: `node ${process.versions.node}`,
      sql: {
        reset: `truncate ${SCHEMA}.job, ${SCHEMA}.archive`,
        pending: `select count(*) from ${SCHEMA}.job where name = '${QUEUE}' and state < 'completed'`,
        // attempts: executions pg-boss counted -- retry_count goes up at each fetch after the first
        // (plans.js fetchNextJob); 0 for a job never fetched.
        final_states: `select id::text, state::text,
                              case when started_on is null then 0 else retry_count + 1 end,
                              output->>'message',
                              case when state = 'active' then started_on + expire_in < now() end
                       from ${SCHEMA}.job where name = '${QUEUE}'
                       union all
                       select id::text, state::text,
                              case when started_on is null then 0 else retry_count + 1 end,
                              output->>'message', null
                       from ${SCHEMA}.archive where name = '${QUEUE}'`,
        // what pg-boss accepted: it keeps the last finish only (completeJobs / failJobs overwrite
        // state, completed_on and output): a completion is one success at completed_on, a final
        // failure one failure; the failures it retried leave no row (docs/reference/contract.md)
        accepted_finishes: ['job', 'archive'].map((t) => `select id::text,
            case state when 'completed' then 'success' when 'failed' then 'failure' end, 'state ' || state,
            case when state in ('completed', 'failed') then completed_on end,
            case when started_on is null then null else retry_count + 1 end,
            format('pgboss.${t} state %s, retry_count %s (pg-boss keeps its last finish only)',
                   state, retry_count)
          from ${SCHEMA}.${t} where name = '${QUEUE}'`).join(' union all '),
      },
      finish_history: 'last', // completeJobs / failJobs overwrite state, completed_on and output
      status: {
        created: 'queued', retry: 'queued', active: 'running', completed: 'done', failed: 'dead',
        cancelled: 'dead',
      },
    });
  },
  async install() {
    const b = boss({ supervise: false, schedule: false });
    await b.start(); // pg-boss's own migrations create its schema
    await b.createQueue(QUEUE);
    await b.stop({ graceful: false, wait: true });
    const role = '"' + process.env.PGJC_WORKER_ROLE.replace(/"/g, '""') + '"';
    const pg = require('pg');
    const conn = new pg.Client({ connectionString: URL });
    await conn.connect();
    // The worker runs pg-boss's start() too: its version check, its maintenance (deletes, archives,
    // the version row's maintained_on): every table and the functions of its schema, no ownership.
    await conn.query(`grant usage on schema ${SCHEMA} to ${role};
      grant select, insert, update, delete on all tables in schema ${SCHEMA} to ${role};
      grant execute on all functions in schema ${SCHEMA} to ${role}`);
    await conn.end();
    contract.emit({ kind: 'installed' });
  },
  async enqueue() {
    const req = contract.readStdin();
    const b = boss({ supervise: false, schedule: false });
    await b.start();
    // fairness=per-tenant-singleton: the queue's 'singleton' policy (types.d.ts QueuePolicy; plans.js
    // job_i2: one active job per singletonKey) with each job's singletonKey its tenant. The policy is set
    // at every enqueue (updateQueue; 'standard', its default, when off): the database may hold the other.
    const fairness = (req.options || {}).fairness || 'off';
    if (!['off', 'per-tenant-singleton'].includes(fairness)) throw new Error(`fairness=${fairness}`);
    const singleton = fairness === 'per-tenant-singleton';
    await b.updateQueue(QUEUE, { policy: singleton ? 'singleton' : 'standard' });
    const ids = [];
    for (const args of req.jobs) {
      // retryLimit: retries after the first execution; expireInSeconds: the lease (whole seconds)
      ids.push([args.job, await b.send(QUEUE, args, { retryLimit: req.max_attempts - 1,
        expireInSeconds: req.intervals.expiration,
        singletonKey: singleton ? `tenant_${args.tenant}` : undefined })]);
    }
    await b.stop({ graceful: false, wait: true });
    contract.emit({ kind: 'enqueued', ids });
  },
  async work() {
    const client = new contract.Client();
    client.watchStatements(); // pg-boss's own statements are strike points too
    const t = client.intervals;
    const b = boss({ maintenanceIntervalSeconds: t['maintenance interval'] });
    await b.start();
    const polling = Math.max(0.5, t['polling interval']);
    if (client.options.finish === 'transaction') {
      await fetchAndComplete(b, client, polling);
    } else {
      // batch_size (adapters/pgboss.py): jobs fetched at once, run one after another in one handler
      const batchSize = Number(client.options.batch_size || 1);
      await b.work(QUEUE, { includeMetadata: true, pollingIntervalSeconds: polling, batchSize },
        async (jobs) => {
          for (const job of jobs) await client.runJob(job.data, job.retryCount + 1);
        });
      while (client.mayDequeue()) await contract.sleep(client.seconds.poll * 1000);
      await b.offWork(QUEUE); // the dequeue budget spent: take no more
    }
    await b.stop({ graceful: true, wait: true });
  },
};

/**
 * finish=transaction (adapters/pgboss.py): pg-boss's fetch() and complete(name, id, data, {db}) -- its
 * docs: complete "would likely only be used with fetch()" -- one job at a time, as work() runs them.
 * The completion runs on the body's connection inside its finishing transaction, so the job_runs row
 * and the completion commit together. complete() matches state = 'active', not the attempt
 * (plans.js completeJobs): a count other than 1 (expired and retried, failed by maintenance) throws,
 * and the body's row rolls back with it. A failure is pg-boss's fail(), as work() calls it. No
 * resolveWithinSeconds here: an expired job comes back by maintenance alone (failJobsByTimeout).
 */
async function fetchAndComplete(b, client, polling) {
  while (client.mayDequeue()) {
    const [job] = await b.fetch(QUEUE, { includeMetadata: true });
    if (!job) {
      await contract.sleep(polling * 1000);
      continue;
    }
    try {
      await client.runJob(job.data, job.retryCount + 1, async (conn) => {
        const db = { executeSql: (text, values) => conn.query(text, values) };
        const done = await b.complete(QUEUE, job.id, null, { db });
        if (done.affected !== 1) throw new Error(`pg-boss: job ${job.id} is no longer active`);
      });
    } catch (err) {
      await b.fail(QUEUE, job.id, err);
    }
  }
}

contract.main(commands);
