'use strict';
// The OutboxSender against the cluster of the libpq environment variables
// (a superuser, as test/client.test.js) and a deduplicating fake downstream
// (fixtures/support.js): a sender killed between the call and the ack, the
// failure table of docs/outbox.md, and a graceful stop.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const path = require('node:path');
const wd = require('..');
const { until, start, kill, startDownstream, httpSend, makeReceiver, dropRole } = require('../fixtures/support');

const RUN = crypto.randomBytes(4).toString('hex');
const ROLE = `node_outbox_${RUN}`;
const SOURCE = `outbox-${RUN}`;
let admin;
let pool;
let downstream;
let keys = 0;
const children = [];
const senders = [];

before(async () => {
  admin = wd.createPool({ max: 2 });
  await makeReceiver(admin, ROLE);
  pool = wd.createPool({ max: 4, user: ROLE });
  downstream = await startDownstream();
});

after(async () => {
  for (const child of children) kill(child);
  for (const sender of senders) await sender.stop();
  await downstream.close();
  await pool.end();
  await dropRole(admin, ROLE);
  await admin.end();
});

/** An intent of a new key of SOURCE, put by its holder with `withClaim`;
 * resolves its id. */
async function intent(target, request, options) {
  keys += 1;
  const { rows: [c] } = await pool.query('SELECT claim_token FROM webhook_dedup.webhook_claim($1, $2)',
    [SOURCE, `k${keys}`]);
  const claim = { source: SOURCE, idemKey: `k${keys}`, claimToken: c.claim_token };
  let id;
  const done = await wd.withClaim(pool, claim, async (client) => {
    id = await wd.outboxPut(client, claim, 'call', target, request, options);
    return null;
  });
  assert.equal(done.status, 'completed');
  return id;
}

async function row(id) {
  const { rows: [r] } = await admin.query(
    'SELECT state, attempt, downstream_key, response, last_error, due_at > now() + interval \'3000 seconds\' AS later'
    + ' FROM webhook_dedup.outbox WHERE id = $1', [id]);
  return r;
}

function sender(target, send, options = {}) {
  const s = new wd.OutboxSender(pool, target, send, { idleMs: 50, ...options });
  senders.push(s);
  s.start();
  return s;
}

test('a sender killed between the call and the ack: the next repeats the call with the same key, performed once',
  async () => {
    const target = `crash-${RUN}`;
    const id = await intent(target, { mode: 'kill' });
    const child = start([path.join(__dirname, '..', 'fixtures', 'sender-child.js')],
      { env: { PGUSER: ROLE, TARGET: target, URL: downstream.url, LEASE: '2 seconds' } });
    children.push(child);
    // the downstream performs the call, then the sender dies before it hears back
    downstream.onKill = async () => { child.kill('SIGKILL'); await child.exited; };
    assert.deepEqual(await child.exited, { code: null, signal: 'SIGKILL' }, child.output);
    const leased = await row(id);
    assert.deepEqual([leased.state, leased.attempt, leased.response], ['processing', 1, null]); // no ack
    const key = leased.downstream_key;
    assert.equal(downstream.performed.get(key), 1);

    // once the lease lapses, another sender takes it back and calls again
    const next = sender(target, httpSend(downstream.url), { lease: '30 seconds' });
    const done = await until(async () => { const r = await row(id); return r.state === 'completed' && r; },
      'the second sender to deliver the intent');
    await next.stop();
    assert.equal(done.attempt, 2);
    assert.equal(downstream.calls.get(key).length, 2); // the same key twice
    assert.equal(downstream.performed.get(key), 1); // performed once
    assert.deepEqual(done.response, { done: key, n: 1 }); // the first call's answer
  });

test('a 4xx dead-letters at once, a 503 is retried with the same key, a 429 waits its Retry-After', async () => {
  const target = `codes-${RUN}`;
  const bad = await intent(target, { mode: 'bad' });
  const busy = await intent(target, { mode: 'busy-once' });
  const throttled = await intent(target, { mode: 'throttle' });
  const s = sender(target, httpSend(downstream.url));
  const [b, y, t] = await until(async () => {
    const rows = await Promise.all([bad, busy, throttled].map(row));
    return rows[0].state === 'dead_lettered' && rows[1].state === 'completed' && rows[2].state === 'failed' && rows;
  }, 'the three intents to settle');
  await s.stop();
  assert.equal(b.attempt, 1);
  assert.equal(b.last_error, 'HTTP 400');
  assert.equal(downstream.calls.get(b.downstream_key).length, 1);
  assert.equal(y.attempt, 2); // 503 with Retry-After 0: due at once, sent again
  assert.equal(downstream.calls.get(y.downstream_key).length, 2);
  assert.equal(downstream.performed.get(y.downstream_key), 1);
  assert.equal(t.attempt, 1);
  assert.equal(t.last_error, 'HTTP 429');
  assert.equal(t.later, true); // due after its Retry-After (3600 s), not the 30 s backoff
});

test('an error that may have been sent parks an intent whose downstream is not idempotent, and retries one that is', async () => {
  const target = `sent-${RUN}`;
  const parked = await intent(target, { n: 1 }, { downstreamIdempotent: false });
  const retried = await intent(target, { n: 2 });
  const refused = await intent(target, { n: 3 }, { downstreamIdempotent: false });
  const unsaid = await intent(target, { n: 4 }, { downstreamIdempotent: false });
  const sends = new Map();
  const s = sender(target, async (i) => {
    sends.set(i.id, (sends.get(i.id) ?? 0) + 1);
    if (i.request.n === 3) throw Object.assign(new Error('connection refused'), { sent: false }); // not sent
    if (i.request.n === 4) throw new Error('socket hang up'); // nobody says: maybe sent
    throw Object.assign(new Error('timed out after sending'), { sent: true });
  }, { lease: '1 minute' });
  const rows = await until(async () => {
    const r = await Promise.all([parked, retried, refused, unsaid].map(row));
    return r[0].state === 'unknown_outcome' && r[1].state === 'failed' && r[2].state === 'failed'
      && r[3].state === 'unknown_outcome' && r;
  }, 'the intents to be reported');
  await s.stop();
  assert.equal(rows[0].last_error, 'timed out after sending');
  assert.equal(sends.get(parked), 1);
  assert.equal(rows[1].last_error, 'timed out after sending');
  assert.equal(rows[2].last_error, 'connection refused');
  assert.equal(rows[3].last_error, 'socket hang up');
  assert.equal(sends.get(unsaid), 1);
});

test('stop() finishes the intent in hand, reports it, and takes no more', async () => {
  const target = `stop-${RUN}`;
  const first = await intent(target, { mode: 'hold' });
  const s = sender(target, httpSend(downstream.url));
  const key = (await row(first)).downstream_key;
  await downstream.heldKey(key); // the call is in flight
  let stopped = false;
  const stopping = s.stop().then(() => { stopped = true; });
  const second = await intent(target, { mode: 'ok' });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(stopped, false); // not while the intent in hand is unreported
  downstream.release(key);
  await stopping;
  const done = await row(first);
  assert.equal(done.state, 'completed'); // acked before stop() resolved
  assert.deepEqual(done.response, { done: key, n: 1 });
  const left = await row(second);
  assert.deepEqual([left.state, left.attempt], ['pending', 0]); // never taken
});

test('a report after the lease lapsed is passed to onError as LeaseLost; a failing database pauses the loop', async () => {
  const target = `late-${RUN}`;
  const id = await intent(target, { n: 1 });
  const errors = [];
  const s = sender(target, async () => {
    // another sender takes the intent once this one's lease lapsed
    await until(async () => (await admin.query(
      'SELECT id FROM webhook_dedup.webhook_outbox_next($1, lease => \'1 minute\')', [target])).rows.length === 1,
    'the lease to lapse and the intent to be taken');
    return { late: true };
  }, { lease: '1 second', onError: (error, i) => errors.push([error, i]) });
  await until(() => errors.length > 0, 'the late ack');
  await s.stop();
  assert.ok(errors[0][0] instanceof wd.LeaseLost, String(errors[0][0]));
  assert.equal(errors[0][1].id, id);
  const r = await row(id);
  assert.deepEqual([r.state, r.attempt, r.response], ['processing', 2, null]); // the other sender's

  let calls = 0;
  const failing = { query: async () => { calls += 1; throw new Error('connection refused'); } };
  const seen = [];
  const broken = new wd.OutboxSender(failing, target, async () => {}, { idleMs: 10, onError: (e) => seen.push(e) });
  const loop = broken.start();
  await until(() => calls >= 3, 'three attempts');
  await broken.stop();
  await loop; // resolves: the errors did not end it
  assert.ok(seen.length >= 3);
  assert.match(seen[0].message, /connection refused/);
});
