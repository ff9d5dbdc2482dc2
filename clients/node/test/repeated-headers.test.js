'use strict';
// A header sent twice, through the package's helpers on a real Node http
// server (docs/signatures.md, "Repeated headers"). Two X-GitHub-Delivery
// lines are refused with 400 repeated_header, two X-Hub-Signature-256 lines
// (one good, one bad, either order) with 401, and neither writes anything:
// the same delivery sent once afterwards is claimed. The Fetch API joins a
// repeated header into one value, which headersFromFetch passes on as it
// is. Against the cluster of the libpq environment variables (a superuser,
// as test/client.test.js).

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const http = require('node:http');
const wd = require('..');
const { makeReceiver, dropRole, signGithub } = require('../fixtures/support');

const RUN = crypto.randomBytes(4).toString('hex');
const SECRET = `repeated-secret-${RUN}`;
const ROLE = `node_repeated_${RUN}`;
const SOURCE = `repeated-${RUN}`; // this file's keys, replay guards and effects
let admin;
let pool; // the receiver login, as an application has it
let server;
let port;

before(async () => {
  admin = wd.createPool({ max: 2 });
  await makeReceiver(admin, ROLE);
  await admin.query('CREATE TABLE IF NOT EXISTS public.node_repeated_effects (idem_key text PRIMARY KEY)');
  await admin.query(`GRANT INSERT, SELECT ON public.node_repeated_effects TO ${ROLE}`);
  pool = wd.createPool({ max: 4, user: ROLE });
  // A GitHub receiver as the README's: headersFromNode, receive, the job in
  // withClaim, the database's answer. It also names the reject reason in a
  // header of its own, for the test to read.
  server = http.createServer(async (req, res) => {
    try {
      const body = await wd.rawBodyFromNode(req);
      const delivery = await wd.receive(pool, 'github', body, wd.headersFromNode(req),
        { secrets: [SECRET], source: SOURCE });
      const reason = { 'X-Test-Reject-Reason': delivery.rejectReason ?? '' };
      if (!delivery.mustProcess) {
        return wd.sendNode(res, { ...delivery.answer, headers: { ...delivery.answer.headers, ...reason } });
      }
      const done = await wd.withClaim(pool, delivery, async (client, claim) => {
        await client.query('INSERT INTO public.node_repeated_effects VALUES ($1)', [claim.idemKey]);
        return { status: 'processed' };
      });
      const answer = wd.answerAfter(delivery, done.result);
      return wd.sendNode(res, { ...answer, headers: { ...answer.headers, ...reason } });
    } catch (err) {
      res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(String(err));
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  ({ port } = server.address());
});

after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await pool.end();
  await dropRole(admin, ROLE);
  await admin.query('DROP TABLE IF EXISTS public.node_repeated_effects');
  await admin.end();
});

/** A GitHub delivery of its own (a body no other test sends: the replay
 * guard keys a body seen before under another id to that id). */
function delivery(name) {
  const id = `${name}-${RUN}`;
  const body = Buffer.from(JSON.stringify({ action: 'opened', issue: { title: id } }));
  return { id, body, signature: signGithub(SECRET, body) };
}

/** POSTs `body` with `pairs` ([name, value], ...) as header lines exactly
 * (a name given twice goes on the wire twice); resolves { status, headers, json }. */
function send(body, pairs) {
  const raw = ['Host', `127.0.0.1:${port}`, 'Content-Type', 'application/json',
    'Content-Length', String(body.length), ...pairs.flat()];
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/webhooks/github', headers: raw },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
          json: JSON.parse(Buffer.concat(chunks).toString()) }));
      });
    req.on('error', reject);
    req.end(body);
  });
}

/** What the database holds of this file's source: keys, replay guards,
 * and the job's effects. */
async function stored() {
  const { rows: [r] } = await admin.query(
    `SELECT (SELECT count(*) FROM webhook_dedup.keys WHERE source = $1)::int AS keys,
            (SELECT count(*) FROM webhook_dedup.replay_guards WHERE source = $1)::int AS guards,
            (SELECT count(*) FROM public.node_repeated_effects)::int AS effects`, [SOURCE]);
  return r;
}

async function keyOf(id) {
  const { rows } = await admin.query(
    'SELECT idem_key, state FROM webhook_dedup.keys WHERE source = $1 AND idem_key = webhook_dedup.webhook_key($1, $2)',
    [SOURCE, id]);
  return rows[0] ?? null;
}

test('X-GitHub-Delivery sent twice is refused with 400 repeated_header, and nothing is stored', async () => {
  const d = delivery('two-ids');
  const before = await stored();
  const pairs = [['X-GitHub-Event', 'issues'], ['X-GitHub-Delivery', d.id], ['X-GitHub-Delivery', `${d.id}-b`],
    ['X-Hub-Signature-256', d.signature]];
  const got = await send(d.body, pairs);
  const expected = await wd.httpAnswer(pool, 'repeated_header', { scheme: 'github' });
  assert.equal(got.status, 400);
  assert.equal(got.status, expected.status);
  assert.equal(got.headers['x-test-reject-reason'], 'repeated_header');
  assert.deepEqual(got.json, { error: 'repeated header' });
  assert.deepEqual(got.json, expected.body);
  assert.equal(got.headers['content-type'], 'application/json');
  assert.equal(got.headers['x-webhook-outcome'], undefined); // no outcome
  assert.deepEqual(await stored(), before);
  // the same delivery with its id once: a claim, so nothing was kept of the refusal
  const once = await send(d.body, [['X-GitHub-Event', 'issues'], ['X-GitHub-Delivery', d.id],
    ['X-Hub-Signature-256', d.signature]]);
  assert.equal(once.status, 200);
  assert.equal(once.headers['x-webhook-outcome'], 'claimed');
  assert.equal((await keyOf(d.id)).state, 'completed');
  assert.equal(await keyOf(`${d.id}-b`), null);
});

test('X-GitHub-Event sent twice is refused with 400 repeated_header as well', async () => {
  const d = delivery('two-types');
  const before = await stored();
  const got = await send(d.body, [['X-GitHub-Event', 'issues'], ['X-GitHub-Event', 'push'],
    ['X-GitHub-Delivery', d.id], ['X-Hub-Signature-256', d.signature]]);
  assert.equal(got.status, 400);
  assert.equal(got.headers['x-test-reject-reason'], 'repeated_header');
  assert.deepEqual(await stored(), before);
});

for (const order of ['good first', 'bad first']) {
  test(`X-Hub-Signature-256 sent twice (${order}) is refused with 401 malformed_header, and nothing is stored`,
    async () => {
      const d = delivery(`two-signatures-${order.replace(' ', '-')}`);
      const bad = signGithub('not the secret', d.body);
      const signatures = order === 'good first' ? [d.signature, bad] : [bad, d.signature];
      const before = await stored();
      const got = await send(d.body, [['X-GitHub-Event', 'issues'], ['X-GitHub-Delivery', d.id],
        ...signatures.map((s) => ['X-Hub-Signature-256', s])]);
      assert.equal(got.status, 401);
      assert.equal(got.headers['x-test-reject-reason'], 'malformed_header');
      assert.deepEqual(got.json, (await wd.httpAnswer(pool, 'rejected', { scheme: 'github' })).body);
      assert.deepEqual(await stored(), before);
      // the same delivery with its good signature once is claimed and processed
      const once = await send(d.body, [['X-GitHub-Event', 'issues'], ['X-GitHub-Delivery', d.id],
        ['X-Hub-Signature-256', d.signature]]);
      assert.equal(once.status, 200);
      assert.deepEqual(once.json, { status: 'processed' });
      assert.equal(once.headers['x-webhook-outcome'], 'claimed');
      assert.equal(once.headers['x-test-reject-reason'], '');
      const key = await keyOf(d.id);
      assert.equal(key.state, 'completed');
      const { rows } = await admin.query('SELECT 1 FROM public.node_repeated_effects WHERE idem_key = $1',
        [key.idem_key]);
      assert.equal(rows.length, 1);
    });
}

test('the same delivery with every header once is claimed (the control)', async () => {
  const d = delivery('control');
  const before = await stored();
  const got = await send(d.body, [['X-GitHub-Event', 'issues'], ['X-GitHub-Delivery', d.id],
    ['X-Hub-Signature-256', d.signature]]);
  assert.equal(got.status, 200);
  assert.deepEqual(got.json, { status: 'processed' });
  assert.equal(got.headers['x-webhook-outcome'], 'claimed');
  const after = await stored();
  assert.deepEqual(after, { keys: before.keys + 1, guards: before.guards + 1, effects: before.effects + 1 });
  // and its copy is a duplicate, answered with the stored result
  const copy = await send(d.body, [['X-GitHub-Event', 'issues'], ['X-GitHub-Delivery', d.id],
    ['X-Hub-Signature-256', d.signature]]);
  assert.equal(copy.status, 200);
  assert.equal(copy.headers['x-webhook-outcome'], 'duplicate');
  assert.deepEqual(copy.json, { status: 'processed' });
});

test('headersFromFetch: the Fetch API joins a repeated header with ", ", and the joined value is one value', async () => {
  const request = (d, pairs) => {
    const headers = new Headers();
    for (const [name, value] of pairs) headers.append(name, value);
    return new Request('http://localhost/webhooks/github', { method: 'POST', body: d.body, headers });
  };
  // a doubled signature: one value that does not decode, refused with 401
  const d = delivery('fetch-signatures');
  const bad = signGithub('not the secret', d.body);
  const twice = request(d, [['X-GitHub-Event', 'issues'], ['X-GitHub-Delivery', d.id],
    ['X-Hub-Signature-256', d.signature], ['X-Hub-Signature-256', bad]]);
  const headers = wd.headersFromFetch(twice.headers);
  assert.equal(headers['x-hub-signature-256'], `${d.signature}, ${bad}`);
  const refused = await wd.receive(pool, 'github', await wd.rawBodyFromFetch(twice), headers,
    { secrets: [SECRET], source: SOURCE });
  assert.deepEqual([refused.verified, refused.rejectReason, refused.answer.status], [false, 'malformed_header', 401]);
  // a doubled id: one odd id, keyed on as it is (the extension cannot see the repeat)
  const e = delivery('fetch-ids');
  const ids = request(e, [['X-GitHub-Event', 'issues'], ['X-GitHub-Delivery', e.id],
    ['X-GitHub-Delivery', `${e.id}-b`], ['X-Hub-Signature-256', e.signature]]);
  const joined = wd.headersFromFetch(ids.headers);
  assert.equal(joined['x-github-delivery'], `${e.id}, ${e.id}-b`);
  const claimed = await wd.receive(pool, 'github', await wd.rawBodyFromFetch(ids), joined,
    { secrets: [SECRET], source: SOURCE });
  assert.equal(claimed.outcome, 'claimed');
  assert.equal(claimed.idemKey, (await keyOf(`${e.id}, ${e.id}-b`)).idem_key);
  assert.equal(await keyOf(e.id), null);
  await admin.query('SELECT webhook_dedup.webhook_complete($1, $2, $3, \'{}\')',
    [SOURCE, claimed.idemKey, claimed.claimToken]);
});
