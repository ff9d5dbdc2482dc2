'use strict';
// The Express example's receiver (../express/server.js) on Hono: the same
// contract (../README.md), written against the Fetch API, as Hono, Next.js
// route handlers, Cloudflare Workers and Deno are: the raw body is
// `await request.arrayBuffer()`, the answer a `Response`. Hono runs here on
// Node.js (@hono/node-server), since node-postgres needs Node's sockets.
//
// Everything the Express receiver does is done by the same code: the job,
// the worker and the sender are ../express/job.js, worker.js and sender.js
// (Node.js, the webhook-dedup client package), and the calls, the raw body,
// the headers and the answers come from the package (clients/node):
// wd.receive, wd.rawBodyFromFetch, wd.headersFromFetch, wd.toResponse.
//
// Configuration: as ../express/server.js (PGHOST, PGPORT, PGUSER,
// PGDATABASE; PORT, HOST; WEBHOOK_LEASE, WEBHOOK_WAIT, WEBHOOK_MODE;
// WEBHOOK_FAULT_INJECTION=1, tests only).

const { Hono } = require('hono');
const { serve } = require('@hono/node-server');
const wd = require('webhook-dedup');
const { createPool, runReceived } = require('../express/job');

const PORT = Number(process.env.PORT || 3000);
const HOST = process.env.HOST || '127.0.0.1';
const LEASE = process.env.WEBHOOK_LEASE || undefined;
const WAIT = process.env.WEBHOOK_WAIT || undefined;
const MODE = process.env.WEBHOOK_MODE || 'claim';
const FAULT_INJECTION = process.env.WEBHOOK_FAULT_INJECTION === '1';
const PROVIDERS = new Set(['github', 'stripe', 'standard']);
// Schemes that sign the request URL (none of the three above; here so that
// adding twilio to PROVIDERS just works): they need `url`, any other
// scheme refuses one (SQLSTATE 22023).
const URL_SIGNING_SCHEMES = new Set(['twilio', 'square', 'hubspot']);
const JSON_HEADERS = { 'Content-Type': 'application/json' };

if (!['claim', 'enqueue'].includes(MODE)) {
  console.error(`WEBHOOK_MODE must be claim or enqueue, not ${MODE}`);
  process.exit(2);
}

const pool = createPool();
const app = new Hono();
// The answer to a database error, http_answer('error'), read at start-up.
let errorAnswer;

// An answer: wd.toResponse sends X-Webhook-Outcome when it has an outcome;
// X-Webhook-Resumed-From is the tests' (not needed by the pattern).
function respond(computed, { body, outcome, resumedFrom } = {}) {
  const headers = { ...computed.headers };
  if (resumedFrom) headers['X-Webhook-Resumed-From'] = resumedFrom;
  return wd.toResponse({ status: computed.status, headers, body: body === undefined ? computed.body : body, outcome });
}

app.get('/healthz', () => respond({ status: 200, headers: JSON_HEADERS, body: { status: 'ok' } }));

app.post('/webhooks/:provider', async (c) => {
  const provider = c.req.param('provider');
  // an unknown provider is refused before its body is read
  if (!PROVIDERS.has(provider)) return respond({ status: 404, headers: JSON_HEADERS, body: { error: 'not found' } });
  // The bytes exactly as received (the signature is over them), at most
  // GitHub's 25 MB; never a parse of them serialised again.
  const body = await wd.rawBodyFromFetch(c.req.raw);
  const delivery = await wd.receive(pool, provider, body, wd.headersFromFetch(c.req.raw.headers), {
    url: URL_SIGNING_SCHEMES.has(provider) ? c.req.url : undefined, lease: LEASE, mode: MODE, wait: WAIT,
  });
  const outcome = delivery.outcome;
  if (!delivery.mustProcess) return respond(delivery.answer, { outcome });
  const fault = FAULT_INJECTION ? c.req.header('x-demo-fault') : undefined;
  const done = await runReceived(pool, delivery, body, fault);
  if (!done.completed) return respond(await wd.httpAnswer(pool, 'lease_lost', { scheme: provider }), { outcome });
  return respond(delivery.answer, { body: done.result, outcome, resumedFrom: done.resumedFrom });
});

app.notFound(() => respond({ status: 404, headers: JSON_HEADERS, body: { error: 'not found' } }));

// A body over the limit keeps its 413; anything else, a database error
// included, is answered http_answer('error') (500), which the provider
// retries; the details go to the log, never to the caller.
app.onError((err, c) => {
  if (err instanceof wd.BodyTooLarge) {
    return respond({ status: 413, headers: JSON_HEADERS, body: { error: 'Payload Too Large' } });
  }
  console.error(`${c.req.method} ${c.req.path}:`, err);
  return respond(errorAnswer);
});

async function main() {
  // as the Express receiver: fail fast, saying what to run or grant
  errorAnswer = await wd.prepareReceiver(pool);
  const server = serve({ fetch: app.fetch, port: PORT, hostname: HOST }, () => {
    console.log(`listening on http://${HOST}:${PORT} (mode ${MODE})`);
  });
  server.on('error', (err) => {
    console.error(`cannot listen on ${HOST}:${PORT}:`, err.message);
    process.exit(1);
  });
  // A clean stop: finish the requests in flight, then close the pool.
  const stop = () => {
    server.close(() => pool.end().finally(() => process.exit(0)));
    if (server.closeIdleConnections) server.closeIdleConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err) => {
  console.error('cannot start:', err.message);
  process.exit(1);
});
