'use strict';
/**
 * pg-job-chaos worker contract, version 1: the Node client (Node >= 20, node-postgres).
 *
 * The same contract as workers/clients/python/pgjc_contract.py (docs/contract.md is the
 * specification): the subcommands describe | install | enqueue | work, the execution log's records
 * (one fs.writeSync per line on an O_APPEND descriptor), the harness's job body, and the wait at a
 * watched point for the supervisor's go -- SIGUSR1, awaited as a promise (never a busy loop; the
 * event loop runs on, so a queue's heartbeat does not freeze with the wait).
 *
 * The harness puts this directory on NODE_PATH: require('pgjc-contract').
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const pg = require('pg');

const CONTRACT = 1;
const ENV = 'PGJC_CONTRACT';
const EXIT_CRASH = 1;
const BODY_TEXTS = new Set(['select clock_timestamp()', 'begin', 'commit', 'rollback']);
const BODY = Symbol('pgjc body connection');

/** Whether an idle body connection still answers an empty query. */
async function alive(conn) {
  try {
    await conn.query('');
    return true;
  } catch (err) {
    conn.broken = err;
    return false;
  }
}

class InjectedError extends Error {}

/** A statement's strike point: "sql:" and 8 hex digits of the SHA-1 of its whitespace-collapsed text. */
function digest(text) {
  return 'sql:' + crypto.createHash('sha1').update(text.split(/\s+/).filter(Boolean).join(' ')).digest('hex').slice(0, 8);
}

/** %(name)s placeholders (the harness's SQL) as $n, and the values in that order. */
function bind(text, params) {
  const names = [];
  const out = text.replace(/%\((\w+)\)s/g, (_, name) => {
    let i = names.indexOf(name);
    if (i < 0) { names.push(name); i = names.length - 1; }
    return '$' + (i + 1);
  });
  return [out, names.map((n) => params[n])];
}

function emit(record) {
  process.stdout.write(JSON.stringify(record) + '\n');
}

/** The statements of a .sql file, each after a "-- name: NAME" line (comments dropped). */
function loadSql(file) {
  const out = {};
  let name = null;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('-- name:')) { name = line.slice(8).trim(); out[name] = []; }
    else if (name !== null && !line.trimStart().startsWith('--')) out[name].push(line);
  }
  for (const k of Object.keys(out)) out[k] = out[k].join('\n').trim().replace(/;$/, '');
  return out;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Client {
  constructor(file = process.env[ENV]) {
    if (!file) throw new Error(`pgjc-contract: ${ENV} is not set (run by pg-job-chaos's contract design)`);
    const spec = this.spec = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (spec.contract !== CONTRACT) throw new Error(`pgjc-contract: contract ${spec.contract}; this client speaks ${CONTRACT}`);
    this.identity = spec.identity;
    this.dsn = spec.dsn;
    this.seconds = spec.seconds;
    this.intervals = spec.intervals || {};
    this.options = spec.options || {};
    this.watch = new Set(spec.watch.map(([job, point]) => JSON.stringify([job, point])));
    this.started = 0;
    this.job = null; // the job this process last started (a statement after it belongs to it)
    this.attempt = null;
    this.fd = fs.openSync(spec.log, 'a');
    this.seen = new Set();
    this.waiting = Promise.resolve(); // one waiter at a time: the go is process-wide
    this.go = null;
    process.on('SIGUSR1', () => { const go = this.go; this.go = null; if (go) go(true); });
    // A deploy's SIGTERM (forwarded by the forked worker): take no more jobs; the adapter's own stop follows
    // (a listener here also keeps Node's default exit off: the job in hand finishes).
    this.terminating = false;
    process.on('SIGTERM', () => { this.terminating = true; });
    // The forked worker that started us asked the kernel to kill us with it; a parent that is gone
    // all the same (reparented) ends us too.
    const parent = process.ppid;
    setInterval(() => { if (process.ppid !== parent) process.exit(70); }, 500).unref();
    this.log('client-start', { runtime: `node ${process.versions.node}`, contract: CONTRACT });
  }

  log(event, fields = {}) {
    const [s, ns] = process.hrtime(); // CLOCK_MONOTONIC: comparable with the harness's time.monotonic()
    const rec = { t: s + ns / 1e9, wall: Date.now() / 1000, worker: this.identity, pid: process.pid, event, ...fields };
    fs.writeSync(this.fd, JSON.stringify(rec) + '\n');
  }

  /** At a watched point: say so, and wait for the go (at most strike_wait seconds). */
  wait(job, attempt, point, backend) {
    const turn = this.waiting.then(() => new Promise((resolve) => {
      this.log('point', { job, attempt, point, backend });
      const timer = setTimeout(() => {
        this.go = null;
        this.log('point-timeout', { job, attempt, point });
        resolve(false);
      }, this.spec.strike_wait * 1000);
      this.go = (ok) => { clearTimeout(timer); resolve(ok); };
    }));
    this.waiting = turn;
    return turn;
  }

  mayDequeue() {
    if (this.terminating) return false;
    return this.spec.dequeues === null || this.started < this.spec.dequeues;
  }

  /** Make every statement this process sends through node-postgres (the queue's own) a strike point. */
  watchStatements() {
    const client = this;
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (config, values, callback) {
      const text = typeof config === 'string' ? config : config && config.text;
      if (typeof text !== 'string' || this[BODY] || BODY_TEXTS.has(text.split(/\s+/).filter(Boolean).join(' ').toLowerCase())) {
        return query.apply(this, arguments);
      }
      const point = digest(text);
      const key = point + (client.job !== null);
      if (!client.seen.has(key)) {
        client.seen.add(key);
        client.log('statement', { point, job: client.job, bound: client.job !== null });
      }
      if (!client.watch.has(JSON.stringify([client.job, point]))) return query.apply(this, arguments);
      const args = arguments;
      const held = client.wait(client.job, client.attempt, point, this.processID).then(() => query.apply(this, args));
      const callbackStyle = typeof args[args.length - 1] === 'function' || (config && typeof config.submit === 'function');
      return callbackStyle ? (config && typeof config.submit === 'function' ? config : undefined) : held;
    };
  }

  async connect() {
    const conn = new pg.Client({ connectionString: this.dsn, application_name: this.identity });
    conn[BODY] = true;
    // An idle kept connection whose server goes away (a failover) emits 'error': without a listener
    // node-postgres's Client throws it and the whole worker process dies. Mark it; borrow() skips it.
    conn.on('error', (err) => { conn.broken = err; });
    await conn.connect();
    this.log('connect', { backend: conn.processID });
    return conn;
  }

  /** A body connection from the client's own small pool: one per concurrent job, kept for the next.
   * A kept connection is checked before it is lent (an empty query, as psycopg_pool's check and
   * SQLAlchemy's pool_pre_ping do): the 'error' listener marks a connection whose socket the client
   * saw close, but one cut while idle -- a restart, a promotion through the endpoint -- may not have
   * told it yet, and a body handed it would fail and burn the queue's attempt. */
  async borrow() {
    // pool_size connections at most (the harness's pool, as a hosted body borrows from it): a job
    // waits for one when as many run at once.
    this.free = this.free || [];
    this.inUse = this.inUse || 0;
    this.queue = this.queue || [];
    if (this.inUse >= (this.spec.pool_size || 1)) await new Promise((resolve) => this.queue.push(resolve));
    this.inUse += 1;
    try {
      let conn;
      while ((conn = this.free.pop())) {
        if (!conn.broken && await alive(conn)) return conn;
        conn.end().catch(() => {});
      }
      return await this.connect();
    } catch (err) {
      this.inUse -= 1;
      this.wake();
      throw err;
    }
  }

  release(conn, broken) {
    if (broken) conn.end().catch(() => {});
    else this.free.push(conn);
    this.inUse -= 1;
    this.wake();
  }

  wake() {
    const next = this.queue.shift();
    if (next) next();
  }

  /**
   * The harness's job body for one execution of the job `args` names (the task's arguments as
   * enqueued), `attempt` as the queue counts it (1-based). Rejects with what the body raised, so the
   * queue records the failure and applies its own retry policy. `inFinish(conn)`, optional: the
   * queue's own completion, run in the body's finishing transaction after its job_runs insert, so
   * both commit together (after-insert then lies after that commit); what it throws rolls both back.
   */
  async runJob(args, attempt, inFinish = null) {
    const ex = new Execution(this, args, Number(attempt));
    const conn = await this.borrow();
    let broken = false;
    try {
      await ex.run(conn, inFinish);
    } catch (err) {
      broken = !!err.pgjcBroken;
      throw err;
    } finally {
      this.release(conn, broken);
    }
  }

  startedCount(job) {
    let n = 0;
    const dir = this.spec.run_dir;
    for (const name of fs.readdirSync(dir)) {
      if (!name.endsWith('.events.jsonl')) continue;
      for (const line of fs.readFileSync(path.join(dir, name), 'utf8').split('\n')) {
        if (!line.includes('"started"')) continue;
        try { const r = JSON.parse(line); if (r.event === 'started' && r.job === job) n += 1; } catch { /* torn */ }
      }
    }
    return n;
  }
}

class Execution {
  constructor(client, args, attempt) {
    this.c = client;
    this.args = args;
    this.attempt = attempt;
    this.job = Number(args.job);
    this.tenant = args.tenant === undefined ? null : args.tenant;
    this.reached = [];
    this.faultName = args.fault || null;
    this.fault = this.faultName ? client.spec.faults[this.faultName] : null;
  }

  log(event, fields = {}) {
    this.c.log(event, { job: this.job, attempt: this.attempt, ...fields });
  }

  q(text, params = {}) {
    const [t, v] = bind(text, params); // rows as arrays: read_invoices has two columns named count
    return this.conn.query({ text: t, values: v, rowMode: 'array' });
  }

  async run(conn, inFinish = null) {
    const c = this.c;
    const sql = c.spec.sql;
    const tenant = c.spec.tenant;
    this.conn = conn;
    c.started += 1;
    c.job = this.job;
    c.attempt = this.attempt;
    try {
      this.log('started', { tenant: this.tenant, fault: this.faultName });
      if (this.args.strikes) {
        const nth = c.startedCount(this.job);
        this.log('execution-count', { nth, strikes: this.args.strikes });
        if (nth > this.args.strikes) this.fault = null;
      }
      if (!tenant.autocommit) await conn.query('begin');
      const me = `${c.identity} ${this.job} ${this.attempt}`.replace(/'/g, "''");
      // no parameters: the simple protocol, as the harness's own body sends it (body.sql says why)
      const [value, last, pid] = (await this.q(sql.inherited_tenant.replace('{me}', `'${me}'`))).rows[0];
      this.log('tenant-inherited', { value, last, backend: pid });
      await this.point('before-tenant');
      await this.setTenant();
      const [visible, foreign] = (await this.q(sql.read_invoices, { tenant: this.tenant })).rows[0];
      this.log('rows-visible', { tenant: this.tenant, visible: Number(visible), foreign: Number(foreign) });
      const started = (await conn.query('select clock_timestamp()')).rows[0].clock_timestamp;
      if (!tenant.autocommit) await conn.query('commit');
      const total = this.workSeconds();
      await sleep(total * 500);
      await this.point('mid-work');
      await sleep(total * 500);
      this.log('effect');
      await this.point('after-effect');
      await this.point('before-finish');
      await conn.query('begin');
      await this.setTenant();
      await this.q(sql.insert_finished_run, { job: this.job, worker: c.identity, attempt: this.attempt, started });
      if (inFinish) await inFinish(conn);
      await conn.query('commit');
      await this.point('after-insert');
    } catch (err) {
      this.log('failed', { error: `${err.constructor.name}: ${String(err.message).split('\n')[0]}`, points: this.reached });
      try { await conn.query('rollback'); } catch { err.pgjcBroken = true; }
      throw err;
    } finally {
      if (tenant.reset) {
        try { await conn.query(tenant.reset); } catch { /* a broken connection is dropped by runJob */ }
      }
    }
    this.log('finished', { points: this.reached });
  }

  async setTenant() {
    if (this.tenant !== null) {
      await this.q(this.c.spec.sql.set_tenant, { tenant: String(this.tenant), local: this.c.spec.tenant.local });
    }
  }

  workSeconds() {
    const seconds = Number(this.args.duration || 0) * this.c.spec.time_scale;
    const factor = this.fault && this.fault.work_lease_factor;
    return factor ? Math.max(seconds, factor * this.c.seconds.lease) : seconds;
  }

  /** A named point: the supervisor's wait if it watches it, then the job's own fault if it strikes here. */
  async point(name) {
    this.reached.push(name);
    if (this.c.watch.has(JSON.stringify([this.job, name]))) {
      await this.c.wait(this.job, this.attempt, name, this.conn.processID);
    }
    const f = this.fault;
    if (!f || !f.strike || (this.args.point || f.point) !== name) return;
    this.log('fault', { fault: this.faultName, point: name });
    if (f.strike === 'raise') throw new InjectedError(`injected fault: raise at ${name}`);
    if (f.strike === 'sql-error') await this.conn.query('select 1/0');
    else if (f.strike === 'crash') process.reallyExit(EXIT_CRASH); // no handler, no finally, no rollback
    else if (f.strike === 'hang') await new Promise(() => {}); // alive, never finishing
    else throw new Error(`pgjc-contract: unknown strike ${f.strike} (contract ${CONTRACT})`);
  }
}

/** Dispatch process.argv[2] to commands[name](); an unknown subcommand exits 2 and names the known ones. */
function main(commands) {
  const name = process.argv[2] || '';
  if (!(name in commands)) {
    process.stderr.write(`usage: ${process.argv[1]} {${Object.keys(commands).join('|')}}\n`);
    process.exit(2);
  }
  Promise.resolve(commands[name]()).then((code) => process.exit(code || 0), (err) => {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
    process.exit(70);
  });
}

/** A subcommand's JSON input on stdin. */
function readStdin() {
  return JSON.parse(fs.readFileSync(0, 'utf8') || 'null');
}

module.exports = { CONTRACT, Client, InjectedError, bind, digest, emit, loadSql, main, readStdin, sleep };
