'use strict';
// README.md's code blocks: each is a file of examples/ (compared byte for
// byte), and each file runs here for real against the cluster of the libpq
// environment variables (a superuser, as test/client.test.js): the install
// from a checkout without network, the database set-up, the Express
// program and the Fetch API handler (served by Hono) answering a signed
// GitHub delivery and its copy, the worker on queued deliveries, and the
// sender delivering the intents the job wrote to a deduplicating
// downstream. Needs examples/node_modules (npm ci in examples/).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const wd = require('..');
const {
  until, childEnv, start, kill, githubDelivery, post, startDownstream, dropRole,
} = require('../fixtures/support');

const ROOT = path.resolve(__dirname, '..');
const EXAMPLES = path.join(ROOT, 'examples');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const RUN = crypto.randomBytes(4).toString('hex');
const ROLE = `node_readme_${RUN}`;
const SECRET = `readme-secret-${RUN}`;
let admin;
let pool; // as the application's role
let secretsBefore; // the highest id of github's keys before this run
const children = [];

function program(file, env = {}) {
  const child = start([path.join(EXAMPLES, file)], { env: { PGUSER: ROLE, ...env }, cwd: EXAMPLES });
  children.push(child);
  return child;
}

async function keyOf(id) {
  const { rows } = await admin.query(
    "SELECT idem_key, state FROM webhook_dedup.keys WHERE source = 'github' AND idem_key LIKE $1", [`%${id}`]);
  assert.equal(rows.length, 1, `one key for delivery ${id}`);
  return rows[0];
}

before(async () => {
  admin = wd.createPool({ max: 2 });
  await admin.query('DROP TABLE IF EXISTS public.github_events');
  await admin.query(`CREATE ROLE ${ROLE} LOGIN`);
  ({ rows: [{ secretsBefore }] } = await admin.query(
    "SELECT coalesce(max(id), 0) AS \"secretsBefore\" FROM webhook_dedup.list_secrets('github')"));
  pool = wd.createPool({ max: 2, user: ROLE });
});

after(async () => {
  for (const child of children) kill(child);
  await pool.end();
  // this run's key of github no longer verifies anything
  await admin.query("SELECT webhook_dedup.retire_secret('github', id) FROM webhook_dedup.list_secrets('github')"
    + ' WHERE id > $1 AND valid_now', [secretsBefore]);
  await admin.query('DROP TABLE IF EXISTS public.github_events');
  await dropRole(admin, ROLE);
  await admin.end();
});

test('every code block of the README is a file of examples/, byte for byte, and every example is in it', () => {
  const fences = README.match(/^```/gm).length;
  assert.equal(fences % 2, 0);
  const blocks = [...README.matchAll(/^<!-- (examples\/[\w.-]+) -->\n```[a-z]*\n([\s\S]*?)^```$/gm)];
  assert.equal(blocks.length * 2, fences, 'a code block without its <!-- examples/... --> line');
  const named = new Set();
  for (const [, file, body] of blocks) {
    assert.equal(body, fs.readFileSync(path.join(ROOT, file), 'utf8'), `README.md's block of ${file}`);
    named.add(file);
  }
  const files = fs.readdirSync(EXAMPLES).filter((f) => /\.(js|mjs|sh)$/.test(f)).map((f) => `examples/${f}`);
  assert.deepEqual([...named].sort(), files.sort());
});

test('the README names every field of the types and options the package exports', () => {
  const sources = fs.readdirSync(path.join(ROOT, 'src')).map((f) => fs.readFileSync(path.join(ROOT, 'src', f), 'utf8'))
    .join('\n');
  const fieldsOf = (name) => {
    const m = sources.match(new RegExp(`^export interface ${name}\\b[^{]*\\{\\n([\\s\\S]*?)^\\}`, 'm'));
    assert.ok(m, `interface ${name} in src/`);
    return [...m[1].matchAll(/^ {2}(\w+)\??:/gm)].map((f) => f[1]);
  };
  // the README's words about a type: from its bold name to the next bold
  // name or heading
  const section = (name) => {
    const at = README.indexOf(`**\`${name}\`**`);
    assert.ok(at >= 0, `README.md names **\`${name}\`**`);
    const rest = README.slice(at + name.length + 6);
    const end = rest.search(/\*\*`|^## /m);
    return end < 0 ? rest : rest.slice(0, end);
  };
  const types = ['Delivery', 'Answer', 'Claim', 'QueuedDelivery', 'WithClaimOptions', 'WorkerOptions',
    'OutboxSenderOptions', 'OutboxIntent', 'SendFailure', 'OutboxPutOptions', 'ReceiveOptions'];
  for (const type of types) {
    const words = section(type);
    const fields = fieldsOf(type);
    assert.ok(fields.length > 0, type);
    for (const field of fields) assert.ok(words.includes(`\`${field}\``), `README.md: ${type}.${field}`);
  }
  const outcome = section('ClaimOutcome');
  for (const word of ["status: 'completed'", "status: 'lease_lost'", "status: 'failed'", 'result', 'error', 'state']) {
    assert.ok(outcome.includes(word), `README.md: ClaimOutcome ${word}`);
  }
});

test('install.sh installs the package from a checkout without dist/, offline, building dist/', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'webhook-dedup-install-'));
  try {
    // a checkout as git gives it: sources, no dist/, no node_modules
    const checkout = path.join(tmp, 'checkout', 'clients', 'node');
    for (const entry of ['src', 'scripts', 'package.json', 'package-lock.json', 'tsconfig.json', 'README.md']) {
      fs.cpSync(path.join(ROOT, entry), path.join(checkout, entry), { recursive: true });
    }
    assert.equal(fs.existsSync(path.join(checkout, 'dist')), false);
    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), '{ "name": "app", "version": "1.0.0", "private": true }\n');
    const run = spawnSync('sh', [path.join(EXAMPLES, 'install.sh')], {
      cwd: app, encoding: 'utf8', timeout: 300000,
      // only npm's cache: the command must work without network once set up
      env: childEnv({ WEBHOOK_DEDUP: path.join(tmp, 'checkout'), npm_config_offline: 'true',
        npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }),
    });
    assert.equal(run.status, 0, `install.sh:\n${run.stdout}\n${run.stderr}`);
    const installed = path.join(app, 'node_modules', 'webhook-dedup');
    assert.ok(fs.lstatSync(installed).isDirectory(), 'a copy, not a link');
    assert.ok(fs.existsSync(path.join(installed, 'dist', 'index.js')));
    assert.ok(fs.existsSync(path.join(installed, 'dist', 'index.d.ts')));
    const used = spawnSync(process.execPath, ['-e',
      "const wd = require('webhook-dedup'); console.log(JSON.stringify([typeof wd.OutboxSender, typeof wd.LeaseLost,"
      + " require.resolve('pg', { paths: [require.resolve('webhook-dedup')] })]))"],
    { cwd: app, encoding: 'utf8', env: childEnv() });
    assert.equal(used.status, 0, used.stderr);
    // the package, and the pg it uses: the application's
    assert.deepEqual(JSON.parse(used.stdout), ['function', 'function', path.join(app, 'node_modules', 'pg', 'lib', 'index.js')]);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('setup.js grants the role, stores the secret and makes the table', async () => {
  const child = start([path.join(EXAMPLES, 'setup.js')], { env: { APP_ROLE: ROLE, GITHUB_WEBHOOK_SECRET: SECRET } });
  assert.deepEqual(await child.exited, { code: 0, signal: null }, child.output);
  const { rows: [granted] } = await admin.query(
    "SELECT pg_has_role($1, 'webhook_dedup_receiver', 'MEMBER') AS receiver,"
    + " has_table_privilege($1, 'public.github_events', 'INSERT') AS insert", [ROLE]);
  assert.deepEqual(granted, { receiver: true, insert: true });
  const { rows } = await admin.query(
    "SELECT id FROM webhook_dedup.list_secrets('github') WHERE id > $1 AND valid_now", [secretsBefore]);
  assert.equal(rows.length, 1);
  await wd.checkInstalled(pool);
});

// A signed delivery, its copy, a forgery and a body the job cannot parse,
// sent to a receiver listening at `url`; what each is answered and wrote.
async function deliverTo(url, label) {
  const first = githubDelivery(SECRET, `${label}-${RUN}`);
  const claimed = await post(url, first.body, first.headers);
  assert.equal(claimed.status, 200, JSON.stringify(claimed));
  assert.equal(claimed.headers['x-webhook-outcome'], 'claimed');
  assert.equal(claimed.headers['content-type'], 'application/json');
  assert.deepEqual(claimed.json, { received: 'issues' });
  const copy = await post(url, first.body, first.headers);
  assert.equal(copy.status, 200);
  assert.equal(copy.headers['x-webhook-outcome'], 'duplicate');
  assert.deepEqual(copy.json, claimed.json); // the first completion's result
  const key = await keyOf(first.id);
  assert.equal(key.state, 'completed');
  const { rows: events } = await admin.query('SELECT action FROM public.github_events WHERE idem_key = $1', [key.idem_key]);
  assert.deepEqual(events, [{ action: 'opened' }]); // once, for two deliveries
  const { rows: intents } = await admin.query(
    "SELECT operation, target, request FROM webhook_dedup.outbox WHERE source = 'github' AND idem_key = $1", [key.idem_key]);
  assert.deepEqual(intents, [{ operation: 'notify', target: 'chat', request: { text: 'issues opened' } }]);

  const forged = githubDelivery('not-the-secret', `${label}-forged-${RUN}`);
  const refused = await post(url, forged.body, forged.headers);
  assert.equal(refused.status, 401);
  assert.equal(refused.headers['x-webhook-outcome'], undefined); // no outcome: refused before a claim

  // the job throws (the body is no JSON): rolled back, recorded with
  // webhook_fail, answered with the error answer read at start-up
  const broken = githubDelivery(SECRET, `${label}-broken-${RUN}`, 'opened', { body: Buffer.from('not json') });
  const failed = await post(url, broken.body, broken.headers);
  assert.equal(failed.status, 500);
  assert.deepEqual({ ...(await wd.httpAnswer(pool, 'error')), outcome: 'claimed' },
    { status: failed.status, headers: { 'Content-Type': failed.headers['content-type'] }, body: failed.json,
      outcome: failed.headers['x-webhook-outcome'] });
  assert.equal((await keyOf(broken.id)).state, 'failed');
}

test('express.js answers a signed GitHub delivery, its copy, a forgery and a failing job', async () => {
  const child = program('express.js', { PORT: '0' });
  const [, url] = await child.line(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
  await deliverTo(`${url}/webhooks/github`, 'express');
  child.kill('SIGTERM');
  assert.deepEqual(await child.exited, { code: 0, signal: null }, child.output); // a clean stop
});

test('route.mjs, on Hono\'s Node.js server, answers as the Express program does', async () => {
  const child = start([path.join(ROOT, 'fixtures', 'serve-route.mjs')], { env: { PGUSER: ROLE } });
  children.push(child);
  const [, url] = await child.line(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
  await deliverTo(`${url}/webhooks/github`, 'fetch');
  child.kill('SIGTERM');
  assert.deepEqual(await child.exited, { code: 0, signal: null }, child.output);
});

test('worker.js does the job of queued deliveries, and stops on SIGTERM', async () => {
  const queued = [githubDelivery(SECRET, `queued-1-${RUN}`, 'closed'), githubDelivery(SECRET, `queued-2-${RUN}`, 'edited')];
  for (const delivery of queued) {
    const got = await wd.receive(pool, 'github', delivery.body, delivery.headers, { mode: 'enqueue' });
    assert.equal(got.outcome, 'accepted');
  }
  const child = program('worker.js');
  const keys = await until(async () => {
    const found = await Promise.all(queued.map((d) => keyOf(d.id)));
    return found.every((k) => k.state === 'completed') && found;
  }, 'the worker to complete the queued deliveries');
  child.kill('SIGTERM');
  assert.deepEqual(await child.exited, { code: 0, signal: null }, child.output);
  const { rows } = await admin.query(
    'SELECT action FROM public.github_events WHERE idem_key = ANY($1) ORDER BY action', [keys.map((k) => k.idem_key)]);
  assert.deepEqual(rows, [{ action: 'closed' }, { action: 'edited' }]);
});

test('sender.js delivers every intent the job wrote, once each, with its downstream key', async () => {
  const downstream = await startDownstream();
  try {
    const { rows: intents } = await admin.query(
      "SELECT id, downstream_key, request FROM webhook_dedup.outbox WHERE target = 'chat' AND source = 'github'"
      + ' AND idem_key LIKE $1', [`%-${RUN}`]);
    assert.equal(intents.length, 4); // express, fetch and two queued deliveries
    const child = program('sender.js', { NOTIFY_URL: downstream.url });
    await until(async () => (await admin.query(
      "SELECT bool_and(state = 'completed') AS done FROM webhook_dedup.outbox WHERE id = ANY($1)",
      [intents.map((i) => i.id)])).rows[0].done, 'the sender to deliver the intents');
    child.kill('SIGTERM');
    assert.deepEqual(await child.exited, { code: 0, signal: null }, child.output);
    for (const intent of intents) {
      assert.deepEqual(downstream.calls.get(intent.downstream_key), [intent.request]);
      assert.equal(downstream.performed.get(intent.downstream_key), 1);
    }
    const { rows: acked } = await admin.query(
      'SELECT downstream_key, response FROM webhook_dedup.outbox WHERE id = ANY($1)', [intents.map((i) => i.id)]);
    for (const row of acked) assert.deepEqual(row.response, { done: row.downstream_key, n: 1 }); // the downstream's answer
  } finally {
    await downstream.close();
  }
});
