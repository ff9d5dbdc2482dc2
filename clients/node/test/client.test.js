'use strict';
// The package against a real cluster with webhook_dedup (the libpq
// environment variables PGHOST, PGPORT, PGUSER, PGDATABASE: scripts/test.sh
// sets them; the role must be a superuser, which the tests use to make a
// receiver login of their own). Run: npm run build && npm test.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const http = require('node:http');
const pg = require('pg');
const wd = require('..');

const RUN = crypto.randomBytes(4).toString('hex'); // keys and sources of this run
const SECRET = `node-secret-${RUN}`;
const RECEIVER = `node_receiver_${RUN}`;
let admin; // superuser pool: set-up and checks
let pool; // the receiver login's pool, as an application has it

function signGithub(body) {
  return `sha256=${crypto.createHmac('sha256', SECRET).update(body).digest('hex')}`;
}

function githubHeaders(id, body, signature = signGithub(body)) {
  return { 'x-github-event': 'issues', 'x-github-delivery': id, 'x-hub-signature-256': signature };
}

function issueBody(id) {
  // the run in it: each run's deliveries are new to a cluster that served an earlier one
  return Buffer.from(JSON.stringify({ action: 'opened', issue: { id, title: `x-${RUN}` } }));
}

before(async () => {
  admin = wd.createPool({ max: 2 });
  await admin.query(`CREATE ROLE ${RECEIVER} LOGIN`);
  await admin.query(`GRANT webhook_dedup_receiver TO ${RECEIVER}`);
  await admin.query('CREATE TABLE IF NOT EXISTS public.node_client_effects (idem_key text PRIMARY KEY, n int)');
  await admin.query(`GRANT INSERT, SELECT ON public.node_client_effects TO ${RECEIVER}`);
  pool = wd.createPool({ max: 4, user: RECEIVER });
});

after(async () => {
  await pool.end();
  await admin.query(`DROP OWNED BY ${RECEIVER}`);
  await admin.query(`DROP ROLE ${RECEIVER}`);
  await admin.end();
});

test('checkInstalled passes for a receiver, and says what to grant otherwise', async () => {
  await wd.checkInstalled(pool);
  assert.deepEqual(await wd.prepareReceiver(pool), await wd.httpAnswer(pool, 'error'));
  const nowhere = wd.createPool({ max: 1, database: `no_such_database_${RUN}` });
  await assert.rejects(wd.prepareReceiver(nowhere), /^Error: cannot connect to the database: .*does not exist/);
  await nowhere.end();
  const stranger = `node_stranger_${RUN}`;
  await admin.query(`CREATE ROLE ${stranger} LOGIN`);
  const other = wd.createPool({ max: 1, user: stranger });
  try {
    await assert.rejects(wd.checkInstalled(other), new RegExp(`GRANT webhook_dedup_receiver TO ${stranger}`));
  } finally {
    await other.end();
    await admin.query(`DROP ROLE ${stranger}`);
  }
});

test('a signed delivery is claimed, completed with its job, and its copy answered with the result', async () => {
  const id = `d1-${RUN}`;
  const body = issueBody(1);
  const first = await wd.receive(pool, 'github', body, githubHeaders(id, body), { secrets: [SECRET] });
  assert.equal(first.verified, true);
  assert.equal(first.outcome, 'claimed');
  assert.equal(first.mustProcess, true);
  assert.equal(first.answer.body, null); // the body is ours, once the work committed
  const done = await wd.withClaim(pool, first, async (client, claim) => {
    await client.query('INSERT INTO public.node_client_effects VALUES ($1, 1)', [claim.idemKey]);
    return { status: 200, ok: true };
  });
  assert.deepEqual(done, { status: 'completed', result: { ok: true, status: 200 } });
  const copy = await wd.receive(pool, 'github', body, githubHeaders(id, body), { secrets: [SECRET] });
  assert.equal(copy.outcome, 'duplicate');
  assert.equal(copy.mustProcess, false);
  assert.equal(copy.answer.status, 200);
  assert.deepEqual(copy.answer.body, done.result);
  assert.equal(copy.answer.headers['Content-Type'], 'application/json');
  // the first delivery's answer once its work committed is the duplicate's,
  // each naming its own outcome (sent as X-Webhook-Outcome)
  assert.equal(first.answer.outcome, 'claimed');
  assert.equal(copy.answer.outcome, 'duplicate');
  assert.deepEqual({ ...wd.answerAfter(first, done.result), outcome: 'duplicate' }, copy.answer);
  assert.equal(wd.answerAfter(first, done.result).outcome, 'claimed');
});

test('outboxPut writes one intent per operation; withClaim ends as lease_lost when it finds the key taken', async () => {
  const source = `outbox-${RUN}`;
  const { rows: [c] } = await pool.query("SELECT claim_token FROM webhook_dedup.webhook_claim($1, 'k')", [source]);
  const claim = { source, idemKey: 'k', claimToken: c.claim_token };
  const ids = [];
  const done = await wd.withClaim(pool, claim, async (client) => {
    ids.push(await wd.outboxPut(client, claim, 'refund', 'refunds', { amount: 5 }, { downstream: 'stripe' }));
    // a second put of the operation (a retried handler) returns the first intent
    ids.push(await wd.outboxPut(client, claim, 'refund', 'refunds', { amount: 5 }));
    return { ok: true };
  });
  assert.equal(done.status, 'completed');
  assert.equal(typeof ids[0], 'string'); // a bigint, as text
  assert.equal(ids[0], ids[1]);
  const { rows: [intent] } = await admin.query(
    'SELECT target, request, downstream_key, downstream_idempotent FROM webhook_dedup.outbox WHERE id = $1', [ids[0]]);
  assert.deepEqual(intent, { target: 'refunds', request: { amount: 5 }, downstream_idempotent: true,
    downstream_key: (await admin.query("SELECT webhook_dedup.webhook_operation_key($1, 'k', 'refund') AS k",
      [source])).rows[0].k });

  // a holder whose token no longer holds the key: the put returns NULL,
  // outboxPut throws LeaseLost, withClaim rolls back and records nothing
  const { rows: [c2] } = await pool.query("SELECT claim_token FROM webhook_dedup.webhook_claim($1, 'k2')", [source]);
  const stale = { source, idemKey: 'k2', claimToken: crypto.randomUUID() };
  let thrown;
  const lost = await wd.withClaim(pool, stale, async (client) => {
    await client.query('INSERT INTO public.node_client_effects VALUES ($1, 9)', [`${source}/k2`]);
    try {
      await wd.outboxPut(client, stale, 'refund', 'refunds', { amount: 6 });
    } catch (error) {
      thrown = error;
      throw error;
    }
    return { unreachable: true };
  });
  assert.ok(thrown instanceof wd.LeaseLost);
  assert.deepEqual(lost, { status: 'lease_lost' });
  const { rows: effects } = await admin.query('SELECT * FROM public.node_client_effects WHERE idem_key = $1', [`${source}/k2`]);
  assert.deepEqual(effects, []);
  const { rows: [key] } = await admin.query(
    "SELECT state, attempt, last_error FROM webhook_dedup.keys WHERE source = $1 AND idem_key = 'k2'", [source]);
  assert.deepEqual(key, { state: 'processing', attempt: 1, last_error: null }); // no webhook_fail: the holder's key
  const { rows: [{ n }] } = await admin.query(
    "SELECT count(*)::int AS n FROM webhook_dedup.outbox WHERE source = $1 AND idem_key = 'k2'", [source]);
  assert.equal(n, 0);
  // the real holder goes on
  const held = await wd.withClaim(pool, { source, idemKey: 'k2', claimToken: c2.claim_token },
    async (client, claim) => { await wd.outboxPut(client, claim, 'refund', 'refunds', {}); return null; });
  assert.equal(held.status, 'completed');
});

test('a Worker records nothing for a handler that throws LeaseLost', async () => {
  const queries = [];
  let handed = false;
  const fake = { query: async (sql) => {
    queries.push(sql);
    if (/webhook_next/.test(sql) && !handed) {
      handed = true;
      return { rows: [{ source: 's', idem_key: 'k', claim_token: crypto.randomUUID(), attempt: 1 }] };
    }
    return { rows: [] };
  } };
  let handled = 0;
  const worker = new wd.Worker(fake, async () => { handled += 1; throw new wd.LeaseLost(); }, { idleMs: 10 });
  const loop = worker.start();
  while (handled === 0) await new Promise((r) => setTimeout(r, 10));
  await worker.stop();
  await loop;
  assert.equal(handled, 1);
  assert.ok(queries.length >= 1);
  assert.deepEqual(queries.filter((sql) => /webhook_fail/.test(sql)), []);
});

test('a connection that dies inside withClaim fails the job, not the process', async () => {
  const source = `killed-${RUN}`;
  const { rows: [c] } = await pool.query("SELECT claim_token FROM webhook_dedup.webhook_claim($1, 'k')", [source]);
  const done = await wd.withClaim(pool, { source, idemKey: 'k', claimToken: c.claim_token }, async (client) => {
    await client.query('SELECT pg_terminate_backend(pg_backend_pid())');
    return { unreachable: true };
  });
  assert.equal(done.status, 'failed');
  assert.equal(done.state, 'failed'); // recorded on a connection of its own
  // the pool still serves
  assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1);
});

test('a job result JSON cannot encode is the job\'s error; options given as null are not sent', async () => {
  const source = `nojson-${RUN}`;
  const { rows: [c] } = await pool.query("SELECT claim_token FROM webhook_dedup.webhook_claim($1, 'k')", [source]);
  const done = await wd.withClaim(pool, { source, idemKey: 'k', claimToken: c.claim_token }, async () => () => 1);
  assert.equal(done.status, 'failed');
  assert.match(done.error.message, /JSON cannot encode/);
  const body = issueBody(4);
  const got = await wd.receive(pool, 'github', body, githubHeaders(`nulls-${RUN}`, body),
    { secrets: [SECRET], mode: null, lease: null, bodyKeyFallback: null });
  assert.equal(got.outcome, 'claimed');
  assert.equal((await wd.httpAnswer(pool, 'completed', { result: null })).body.status, 'completed');
});

test('a forged signature is not verified and writes nothing', async () => {
  const body = issueBody(2);
  const forged = await wd.receive(pool, 'github', body, githubHeaders(`forged-${RUN}`, body, 'sha256=00'),
    { secrets: [SECRET] });
  assert.equal(forged.verified, false);
  assert.equal(forged.outcome, null);
  assert.equal(forged.answer.status, 401);
  const { rows: [{ n }] } = await admin.query(
    'SELECT count(*)::int AS n FROM webhook_dedup.keys WHERE idem_key LIKE $1', [`%forged-${RUN}%`]);
  assert.equal(n, 0);
});

test('a body with zero bytes and bytes that are not UTF-8 round-trips exactly', async () => {
  const body = Buffer.from([0x7b, 0x00, 0x01, 0xff, 0xfe, 0x80, 0x00, 0x7d, 0xc3, 0x28]);
  const id = `bytes-${RUN}`;
  // the HMAC over these bytes verifies only if every byte arrived
  const queued = await wd.receive(pool, 'github', body, githubHeaders(id, body),
    { secrets: [SECRET], mode: 'enqueue', source: `bytes-${RUN}` });
  assert.equal(queued.verified, true);
  assert.equal(queued.outcome, 'accepted');
  // and the stored payload, as webhook_next hands it out, is the same bytes
  const { rows: [row] } = await pool.query(
    'SELECT payload FROM webhook_dedup.webhook_next(source => $1)', [`bytes-${RUN}`]);
  assert.ok(Buffer.isBuffer(row.payload));
  assert.ok(row.payload.equals(body), row.payload.toString('hex'));
});

test('withClaim rolls the job back when the completion finds another holder', async () => {
  const { rows: [c] } = await pool.query(
    "SELECT claim_token FROM webhook_dedup.webhook_claim($1, 'stale')", [`stale-${RUN}`]);
  assert.ok(c.claim_token);
  const stale = { source: `stale-${RUN}`, idemKey: 'stale', claimToken: crypto.randomUUID() };
  const done = await wd.withClaim(pool, stale, async (client) => {
    await client.query('INSERT INTO public.node_client_effects VALUES ($1, 2)', [`stale-${RUN}`]);
    return { ok: true };
  });
  assert.deepEqual(done, { status: 'lease_lost' });
  const { rows } = await admin.query('SELECT * FROM public.node_client_effects WHERE idem_key = $1', [`stale-${RUN}`]);
  assert.deepEqual(rows, []);
});

test('withClaim records a job that throws with webhook_fail and rolls its writes back', async () => {
  const source = `fails-${RUN}`;
  const { rows: [c] } = await pool.query("SELECT claim_token FROM webhook_dedup.webhook_claim($1, 'k')", [source]);
  const claim = { source, idemKey: 'k', claimToken: c.claim_token };
  const done = await wd.withClaim(pool, claim, async (client) => {
    await client.query('INSERT INTO public.node_client_effects VALUES ($1, 3)', [`fails-${RUN}`]);
    throw new Error('downstream timed out');
  });
  assert.equal(done.status, 'failed');
  assert.equal(done.state, 'failed');
  assert.equal(done.error.message, 'downstream timed out');
  const { rows: [key] } = await admin.query(
    'SELECT state, last_error FROM webhook_dedup.keys WHERE source = $1', [source]);
  assert.deepEqual(key, { state: 'failed', last_error: 'downstream timed out' });
  const { rows } = await admin.query('SELECT * FROM public.node_client_effects WHERE idem_key = $1', [`fails-${RUN}`]);
  assert.deepEqual(rows, []);
  // not retryable: dead-lettered at once
  const { rows: [c2] } = await pool.query("SELECT claim_token FROM webhook_dedup.webhook_claim($1, 'k2')", [source]);
  const dead = await wd.withClaim(pool, { source, idemKey: 'k2', claimToken: c2.claim_token },
    async () => { throw new Error('bad request'); }, { retryable: () => false });
  assert.equal(dead.state, 'dead_lettered');
});

test('a Worker processes every queued delivery once, and stops gracefully', async () => {
  const source = `queue-${RUN}`;
  for (let i = 0; i < 7; i++) {
    await pool.query("SELECT webhook_dedup.webhook_enqueue($1, $2, convert_to($3, 'UTF8'))",
      [source, `k${i}`, `{"n": ${i}}`]);
  }
  const seen = [];
  const outcomes = [];
  const worker = new wd.Worker(pool, async (delivery) => {
    // k6: the handler itself throws: the worker records it (retryable)
    if (delivery.idemKey === 'k6') throw new Error('no withClaim');
    const outcome = await wd.withClaim(pool, delivery, async (client) => {
      const n = JSON.parse(delivery.payload.toString()).n;
      if (n === 3) throw new Error('the third fails');
      await client.query('INSERT INTO public.node_client_effects VALUES ($1, $2)', [`${source}/${delivery.idemKey}`, n]);
      seen.push(delivery.idemKey);
      return { n };
    }, { retryable: false });
    outcomes.push([delivery.idemKey, outcome.status]);
    if (delivery.idemKey === 'k5') throw new Error('after its completion: webhook_fail finds a stale token');
  }, { source, batch: 4, idleMs: 50 });
  const loop = worker.start();
  const deadline = Date.now() + 10000;
  const handled = async () => (await admin.query(
    "SELECT count(*)::int AS n FROM webhook_dedup.keys WHERE source = $1 AND state <> 'processing'", [source])).rows[0].n;
  while ((outcomes.length < 6 || await handled() < 7) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await worker.stop();
  await loop;
  assert.deepEqual(outcomes.map(([k]) => k).sort(), ['k0', 'k1', 'k2', 'k3', 'k4', 'k5']);
  assert.deepEqual(seen.sort(), ['k0', 'k1', 'k2', 'k4', 'k5']);
  const { rows } = await admin.query(
    'SELECT idem_key, state, result FROM webhook_dedup.keys WHERE source = $1 ORDER BY idem_key', [source]);
  assert.deepEqual(rows.map((r) => [r.idem_key, r.state]), [
    ['k0', 'completed'], ['k1', 'completed'], ['k2', 'completed'], ['k3', 'dead_lettered'],
    ['k4', 'completed'], ['k5', 'completed'], ['k6', 'failed']]);
  assert.deepEqual(rows[1].result, { n: 1 });
});

test('a pg-native client is refused before it can cut a body at a zero byte', async () => {
  const fakeNative = { native: { query() {} }, query: async () => ({ rows: [] }) };
  await assert.rejects(wd.receive(fakeNative, 'github', Buffer.from('{}'), {}), /pg-native/);
  assert.doesNotThrow(() => wd.assertExactBytes(pool));
  assert.doesNotThrow(() => wd.assertExactBytes(new pg.Client()));
});

test('answers are sent exactly: Node responses and Fetch API responses', async () => {
  const answer = { status: 429, headers: { 'Content-Type': 'application/json', 'Retry-After': '3' }, body: { a: 1 } };
  const response = wd.toResponse(answer);
  assert.equal(response.status, 429);
  assert.equal(response.headers.get('retry-after'), '3');
  assert.equal(response.headers.get('content-type'), 'application/json');
  assert.deepEqual(await response.json(), { a: 1 });
  assert.equal(response.headers.get('x-webhook-outcome'), null); // no outcome, no header
  const named = wd.toResponse({ ...answer, outcome: 'duplicate' });
  assert.equal(named.headers.get('x-webhook-outcome'), 'duplicate');
  assert.equal(named.headers.get('retry-after'), '3');

  const server = http.createServer(async (req, res) => {
    const body = await wd.rawBodyFromNode(req);
    wd.sendNode(res, { ...answer, body: { got: body.toString('hex'), headers: wd.headersFromNode(req) },
      outcome: req.headers['x-outcome'] ?? null });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const { port } = server.address();
    const sent = Buffer.from([0, 1, 2, 255]);
    const reply = await new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/',
        // raw headers (a flat list of names and values): one sent twice
        headers: ['Host', `127.0.0.1:${port}`, 'X-Repeated', 'a', 'X-Repeated', 'b', 'X-Once', 'c',
          'Content-Length', '4'] }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ res, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      req.end(sent);
    });
    assert.equal(reply.res.statusCode, 429);
    assert.equal(reply.res.headers['content-type'], 'application/json'); // no charset added
    assert.equal(reply.res.headers['retry-after'], '3');
    assert.equal(reply.res.headers['x-webhook-outcome'], undefined); // outcome null: no header
    const got = JSON.parse(reply.body);
    assert.equal(got.got, '000102ff');
    assert.deepEqual(got.headers['x-repeated'], ['a', 'b']);
    assert.equal(got.headers['x-once'], 'c');
    const named = await new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'X-Outcome': 'conflict' } },
        (res) => { res.resume(); res.on('end', () => resolve(res)); });
      req.on('error', reject);
      req.end();
    });
    assert.equal(named.statusCode, 429);
    assert.equal(named.headers['x-webhook-outcome'], 'conflict');
  } finally {
    server.close();
  }

  const request = new Request('http://localhost/webhooks', { method: 'POST', body: Buffer.from([0, 255]),
    headers: { 'X-Hub-Signature-256': 'sha256=ab' } });
  assert.deepEqual([...await wd.rawBodyFromFetch(request)], [0, 255]);
  assert.deepEqual(wd.headersFromFetch(request.headers), { 'x-hub-signature-256': 'sha256=ab' });
  const big = new Request('http://localhost/', { method: 'POST', body: Buffer.alloc(11) });
  await assert.rejects(wd.rawBodyFromFetch(big, 10), wd.BodyTooLarge);
  // chunked, without Content-Length: cancelled as soon as it passes the limit
  let pulled = 0;
  const endless = new ReadableStream({ pull(controller) { pulled += 1024; controller.enqueue(new Uint8Array(1024)); } });
  const chunked = new Request('http://localhost/', { method: 'POST', body: endless, duplex: 'half' });
  await assert.rejects(wd.rawBodyFromFetch(chunked, 10 * 1024), wd.BodyTooLarge);
  assert.ok(pulled <= 16 * 1024, `read ${pulled} bytes for a limit of 10 KiB`);
});

test('rawBodyFromNode reads a stream nobody read, and refuses one a parser consumed', async () => {
  const server = http.createServer(async (req, res) => {
    try {
      if (req.url === '/unread') req.body = {}; // a parser whose type did not match (Express 4)
      if (req.url === '/parsed') { for await (const _ of req); req.body = {}; } // express.json() on {}
      const body = await wd.rawBodyFromNode(req);
      res.end(`read ${body.toString('hex')}`);
    } catch (err) {
      res.end(`refused ${err.constructor.name}`);
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const { port } = server.address();
    const send = (path) => new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path }, (res) => {
        let text = '';
        res.on('data', (c) => { text += c; });
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end(Buffer.from('{ }'));
    });
    assert.equal(await send('/unread'), 'read 7b207d');
    assert.equal(await send('/parsed'), 'refused TypeError');
  } finally {
    server.close();
  }
});

test('a Worker goes on when webhook_next fails and its onError throws, and stops at once', async () => {
  let calls = 0;
  const failing = { query: async () => { calls += 1; throw new Error('webhook_next: 42501'); } };
  const worker = new wd.Worker(failing, async () => {}, { idleMs: 10, onError: () => { throw new Error('logger down'); } });
  const loop = worker.start();
  while (calls < 3) await new Promise((r) => setTimeout(r, 10));
  const started = Date.now();
  await worker.stop();
  await loop; // resolves: neither error ended it
  assert.ok(Date.now() - started < 1000);
});

test('httpAnswer gives every outcome its answer, and error for when the database fails', async () => {
  const error = await wd.httpAnswer(pool, 'error');
  assert.equal(error.status, 500);
  // the provider retries a 5xx: a lost lease and a copy still in progress
  // are answered so, the latter with the Retry-After it was given
  const lost = await wd.httpAnswer(pool, 'lease_lost', { scheme: 'github' });
  assert.deepEqual(lost, { status: 503, headers: { 'Content-Type': 'application/json' },
    body: { status: 'lease_lost' } });
  const busy = await wd.httpAnswer(pool, 'in_progress', { scheme: 'stripe', retryAfter: '2 seconds' });
  assert.deepEqual(busy, { status: 503, headers: { 'Content-Type': 'application/json', 'Retry-After': '2' },
    body: { status: 'in_progress' } });
  // the body of completed is the result given
  assert.deepEqual((await wd.httpAnswer(pool, 'completed', { result: { id: 7 } })).body, { id: 7 });
  await assert.rejects(wd.httpAnswer(pool, 'no_such_outcome'), (err) => err.code === '22023');
});
