'use strict';
/**
 * The reference queue (queue.sql) as a contract client in Node: the same queue as worker.py.
 *
 *   pg-job-chaos search --design contract --design-option command="node examples/contract/worker.js"
 *
 * Node >= 20 with node-postgres: the harness puts workers/clients/node (and its node_modules) on NODE_PATH.
 */
const path = require('node:path');
const pg = require('pg');
const contract = require('pgjc-contract');

const SQL = contract.loadSql(path.join(__dirname, 'queue.sql'));
const URL = process.env.DATABASE_URL;

async function withClient(fn) {
  const conn = new pg.Client({ connectionString: URL });
  await conn.connect();
  try { return await fn(conn); } finally { await conn.end(); }
}

const commands = {
  describe() {
    contract.emit({ kind: 'descriptor', contract: contract.CONTRACT, system: 'contract-reference-node', version: '1',
      runtime: `node ${process.versions.node}`,
      sql: { reset: SQL.reset, pending: SQL.pending, final_states: SQL.final_states },
      status: { queued: 'queued', running: 'running', done: 'done', failed: 'dead' } });
  },
  install() {
    const role = '"' + process.env.PGJC_WORKER_ROLE.replace(/"/g, '""') + '"';
    return withClient(async (conn) => {
      await conn.query(SQL.install);
      await conn.query(SQL.grant.replaceAll('{role}', role));
      contract.emit({ kind: 'installed' });
    });
  },
  enqueue() {
    const req = contract.readStdin();
    return withClient(async (conn) => {
      const ids = [];
      for (const args of req.jobs) {
        const [text, values] = contract.bind(SQL.enqueue, { args: JSON.stringify(args), max_attempts: req.max_attempts });
        ids.push([args.job, (await conn.query(text, values)).rows[0].id]);
      }
      contract.emit({ kind: 'enqueued', ids });
    });
  },
  async work() {
    const client = new contract.Client();
    client.watchStatements(); // the queue's own statements are strike points too
    const { lease, poll } = client.seconds;
    const conn = new pg.Client({ connectionString: URL, application_name: `${client.identity}/queue` });
    await conn.connect();
    while (client.mayDequeue()) {
      const [claim, values] = contract.bind(SQL.claim, { lease });
      const row = (await conn.query(claim, values)).rows[0];
      if (!row) { await contract.sleep(poll * 1000); continue; }
      try {
        await client.runJob(row.args, row.attempts);
        const [finish, v] = contract.bind(SQL.finish, { id: row.id });
        await conn.query(finish, v);
      } catch (err) {
        const [fail, v] = contract.bind(SQL.fail, { id: row.id, error: `${err.constructor.name}: ${err.message}` });
        await conn.query(fail, v);
      }
    }
    await conn.end();
  },
};

contract.main(commands);
