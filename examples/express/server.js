'use strict';
// A webhook receiver whose whole correctness lives in SQL (webhook_dedup).
//
// Webhook providers deliver *at least once*: they retry on timeouts and
// non-2xx answers, sometimes send the same delivery twice at the same
// moment, and anyone can POST to your URL. So every delivery needs its
// signature verified, an idempotency key, a claim that only one worker wins,
// and steps that happen exactly once. Here that is one SQL call,
// webhook_receive (verify + key + claim), then the two-step job of job.js.
//
// The HTTP answer is data the database computes: webhook_receive's row
// carries http_status, http_headers and response (the JSON body) for every
// outcome, and this app sends exactly those; it decides no status itself.
//
// The receiver holds no secret: webhook_receive verifies with the keys an
// operator stored in the database (webhook_dedup.add_secret).
//
// Configuration (examples/README.md): PGHOST, PGPORT, PGUSER, PGDATABASE;
// PORT, HOST (default 127.0.0.1); WEBHOOK_LEASE (a PostgreSQL interval);
// WEBHOOK_WAIT (a PostgreSQL interval); WEBHOOK_MODE (claim or enqueue);
// WEBHOOK_FAULT_INJECTION=1 (tests only).

const http = require('node:http');
const express = require('express');
const wd = require('webhook-dedup'); // clients/node: receive, the answers, raw bodies
const { createPool, runReceived } = require('./job');

const PORT = Number(process.env.PORT || 3000); // Express's conventional port
const HOST = process.env.HOST || '127.0.0.1';
const LEASE = process.env.WEBHOOK_LEASE || null; // null: the extension's default lease
// How long a copy of a delivery that another worker is processing waits for
// it ('2 seconds'; '0': not at all); null: the provider's default_wait.
const WAIT = process.env.WEBHOOK_WAIT || null;
const MODE = process.env.WEBHOOK_MODE || 'claim';
const FAULT_INJECTION = process.env.WEBHOOK_FAULT_INJECTION === '1';

// The providers this receiver accepts, each by its webhook_dedup scheme
// (the source's name too, and the route: POST /webhooks/stripe).
const PROVIDERS = new Set(['github', 'stripe', 'standard']);
// Schemes that sign the request URL: they need it in `url`, and any other
// scheme refuses a `url` (SQLSTATE 22023). None of ours does; the set is
// here so that adding, say, twilio to PROVIDERS just works.
// (HubSpot signs the method too: it would also need `method => 'POST'`.)
const URL_SIGNING_SCHEMES = new Set(['twilio', 'square', 'hubspot']);

if (!['claim', 'enqueue'].includes(MODE)) {
  console.error(`WEBHOOK_MODE must be claim or enqueue, not ${MODE}`);
  process.exit(2);
}

const pool = createPool();
const app = express();
app.disable('x-powered-by');

// The full URL as the provider called it: scheme://host:port/path?query.
// Behind a proxy or load balancer, set app.set('trust proxy', ...) so that
// req.protocol is the provider's scheme, not the proxy's.
function requestUrl(req) {
  return `${req.protocol}://${req.get('host')}${req.originalUrl}`;
}

const JSON_HEADERS = { 'Content-Type': 'application/json' };

// Sends an answer exactly (wd.sendNode: its status and headers, no charset
// added to the Content-Type as Express's res.json would, the JSON body, and
// X-Webhook-Outcome naming the delivery's outcome when there is one).
// X-Webhook-Resumed-From is not needed by the pattern: it only lets the
// tests (and the curious) see where a reclaim resumed.
function answer(res, status, headers, body, { outcome, resumedFrom } = {}) {
  const extra = resumedFrom ? { 'X-Webhook-Resumed-From': resumedFrom } : {};
  wd.sendNode(res, { status, headers: { ...headers, ...extra }, body, outcome });
}

// The answer the database computed (webhook_receive's, http_answer's), or
// `body` (our own result, after the job) in its place.
function answerWith(res, computed, { body, outcome, resumedFrom } = {}) {
  answer(res, computed.status, computed.headers, body === undefined ? computed.body : body,
    { outcome, resumedFrom });
}

// The answer to a database error: webhook_dedup.http_answer('error'), read
// at start-up (main below), since the database cannot be asked when it fails.
let errorAnswer;

app.get('/healthz', (req, res) => answer(res, 200, JSON_HEADERS, { status: 'ok' }));

app.post(
  '/webhooks/:provider',
  // An unknown provider is refused before its body is read.
  (req, res, next) => (PROVIDERS.has(req.params.provider) ? next() : answer(res, 404, JSON_HEADERS, { error: 'not found' })),
  // The body exactly as received, as a Buffer: the signature is over these
  // bytes. This is the classic place where Stripe verification breaks:
  // express.json() parses the body, and anything re-serialised from it
  // (JSON.stringify(req.body)) is other bytes: the signature no longer
  // matches. Never put express.json() in front of a webhook route.
  // GitHub caps payloads at 25 MB. ('*/*' matches any request that has a
  // Content-Type, as every provider sends; without one the body is not read,
  // and the empty body then fails verification: 401.)
  express.raw({ type: '*/*', limit: '25mb' }),
  receive,
);

async function receive(req, res) {
  const provider = req.params.provider;
  // the bytes express.raw read (an empty body when the request had no
  // Content-Type: its signature then fails, 401)
  const body = await wd.rawBodyFromNode(req);

  // Verify, derive the idempotency key and claim it (or, in enqueue mode,
  // store the delivery for a worker), in ONE autocommitted statement: the
  // claim is committed when the call returns, so every other process sees
  // it at once (a concurrent copy waits, at most WAIT, for us to finish,
  // then gets the duplicate's answer, else in_progress's). A delivery that
  // does not verify writes nothing at all.
  // Parameters only, never string concatenation; the body goes as bytes
  // (a Buffer is sent as bytea), the headers as JSON text cast to jsonb.
  // (wd.receive binds the body as binary bytea and the headers, every one,
  // repeated ones as lists, as jsonb; the options given by name.)
  const delivery = await wd.receive(pool, provider, body, wd.headersFromNode(req), {
    url: URL_SIGNING_SCHEMES.has(provider) ? requestUrl(req) : undefined,
    lease: LEASE ?? undefined,
    mode: MODE,
    wait: WAIT ?? undefined,
  });
  const outcome = delivery.outcome;

  if (!delivery.mustProcess) {
    // Every other outcome, and every refusal (outcome null), is answered as
    // the database says (examples/README.md's table).
    return answerWith(res, delivery.answer, { outcome });
  }
  // We hold the key until our lease expires: do the job, then answer.
  const fault = FAULT_INJECTION ? req.get('x-demo-fault') : undefined;
  const done = await runReceived(pool, delivery, body, fault);
  if (!done.completed) {
    // Our lease expired and another worker reclaimed the key; our step was
    // rolled back (done.lost says which). The provider retries, and gets
    // that worker's answer.
    return answerWith(res, await wd.httpAnswer(pool, 'lease_lost', { scheme: provider }), { outcome });
  }
  // The claim's status and headers, with our result as the body.
  return answerWith(res, delivery.answer, { body: done.result, outcome, resumedFrom: done.resumedFrom });
}

app.use((req, res) => answer(res, 404, JSON_HEADERS, { error: 'not found' }));

// Every error ends here (Express 5 passes on a rejected async handler).
// A body too large (413) or unreadable (400) keeps its status; anything else,
// a database error included, is answered http_answer('error') (500), which
// the provider retries. The details go to the log, never to the caller.
app.use((err, req, res, next) => {
  if (res.headersSent) return next(err);
  if (err.status >= 400 && err.status < 500) {
    return answer(res, err.status, JSON_HEADERS, { error: http.STATUS_CODES[err.status] });
  }
  console.error(`${req.method} ${req.originalUrl}:`, err);
  return answerWith(res, errorAnswer);
});

async function main() {
  // Fail fast when the database is unreachable, lacks the extension, or the
  // role may not call webhook_receive (the error says what to run or
  // grant); keep http_answer('error'), the same for every provider.
  errorAnswer = await wd.prepareReceiver(pool);

  const server = app.listen(PORT, HOST, (err) => {
    if (err) {
      console.error(`cannot listen on ${HOST}:${PORT}:`, err.message); // the port is taken, ...
      process.exit(1);
    }
    console.log(`listening on http://${HOST}:${PORT} (mode ${MODE})`);
  });
  // A clean stop: finish the requests in flight, then close the pool.
  const stop = () => {
    server.close(() => pool.end().finally(() => process.exit(0)));
    server.closeIdleConnections(); // idle keep-alive connections (Node 18 kept them open)
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err) => {
  console.error('cannot start:', err.message);
  process.exit(1);
});
