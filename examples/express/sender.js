'use strict';
// The sender: delivers the notifications the job writes to the outbox.
//
// Step 1 of the job (job.js) commits an intent, webhook_outbox_put(...,
// 'notify', 'notifications', request), together with its checkpoint. This
// process takes due intents of the target 'notifications' with
// webhook_outbox_next (each leased to it, with a lease token), POSTs each
// request to the notification service at NOTIFY_URL with the intent's
// downstream idempotency key as the Idempotency-Key header, and reports:
//
// - 2xx: webhook_outbox_ack, with the service's JSON answer;
// - 3xx (redirects are not followed: a POST must not become a GET) and 4xx
//   other than 408, 409 and 429 (the request is wrong and will stay wrong):
//   webhook_outbox_fail(retryable => false), a dead letter for an operator;
// - anything else (5xx, 408, 409, 429, a refused connection, a timeout):
//   webhook_outbox_fail, retried after a backoff. A timeout may come after
//   the service acted: the retry carries the same key, and the service
//   answers it with the first call's result instead of acting again.
//
// If this process dies between the call and the report, the intent's lease
// lapses and the next sender sends it again, with the same key. Run as many
// as you like: webhook_outbox_next never hands one intent to two senders
// (docs/outbox.md).
//
// Configuration: the libpq variables, NOTIFY_URL (required), SENDER_LEASE
// (a PostgreSQL interval; unset: '30 seconds'), SENDER_FAULT (tests only:
// crash-before-call or crash-after-call, fired on an intent's first attempt).
// Stops cleanly on SIGTERM (or Ctrl-C) after the intents in hand.

const { createPool, NOTIFY_TARGET } = require('./job');

const URL_ = process.env.NOTIFY_URL;
const LEASE = process.env.SENDER_LEASE || '30 seconds';
const FAULT = process.env.SENDER_FAULT || undefined;
// One intent per lease: a batch's leases start together, and a slow service
// would let the last ones lapse while the first are sent (docs/outbox.md,
// "One call per lease").
const BATCH = 1;
const IDLE_MS = 200;
const CALL_TIMEOUT_MS = 10000; // keep it well under the lease

if (!URL_) {
  console.error('cannot start: NOTIFY_URL is not set (the notification service\'s URL)');
  process.exit(1);
}

const pool = createPool();
let stopping = false;
process.on('SIGTERM', () => { stopping = true; });
process.on('SIGINT', () => { stopping = true; });

// Fault injection (tests only): die like `kill -9`, at once.
function die(fault) {
  console.error(`fault injection: ${fault}: exiting now, like kill -9`);
  process.exit(137);
}

// POST the request; { status, answer }, status null when nothing came back.
async function call(key, request) {
  try {
    const resp = await fetch(URL_, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
      body: JSON.stringify(request),
      redirect: 'manual', // a 3xx is an answer: following it would turn the POST into a GET
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
    });
    const text = await resp.text();
    let answer = null;
    try { answer = text ? JSON.parse(text) : null; } catch { answer = null; }
    return { status: resp.status, answer };
  } catch (err) {
    console.error(`${key}: no answer: ${err.message}`);
    return { status: null, answer: null };
  }
}

async function send(intent) {
  const fault = intent.attempt === 1 ? FAULT : undefined;
  if (fault === 'crash-before-call') die(fault);
  const { status, answer } = await call(intent.downstream_key, intent.request);
  if (fault === 'crash-after-call') die(fault); // the service acted; the ack never comes
  if (status !== null && status >= 200 && status < 300) {
    await pool.query('SELECT webhook_dedup.webhook_outbox_ack($1, $2, $3::jsonb)',
      [intent.id, intent.lease_token, JSON.stringify(answer)]);
    console.log(`${intent.downstream_key}: delivered (attempt ${intent.attempt})`);
    return;
  }
  // 5xx, a timeout, 408 and 429 may pass; 409 is Stripe's "this key is in use
  // by a request in flight"; other 4xx and 3xx will not get better
  const retryable = status === null || status >= 500 || [408, 409, 429].includes(status);
  const { rows: [row] } = await pool.query(
    'SELECT webhook_dedup.webhook_outbox_fail($1, $2, $3, retryable => $4) AS state',
    [intent.id, intent.lease_token, status ? `HTTP ${status}` : 'no answer', retryable]);
  console.error(`${intent.downstream_key}: attempt ${intent.attempt} failed (HTTP ${status}): ${row.state}`);
}

async function main() {
  console.log(`sender started (target ${NOTIFY_TARGET}, lease ${LEASE})`);
  while (!stopping) {
    // Its own autocommitted statement: the leases commit when it returns, so
    // no transaction stays open during a call. (id is a bigint: node-postgres
    // gives it as a string, which goes back to PostgreSQL as it came.)
    const { rows } = await pool.query(
      `SELECT id, lease_token, downstream_key, request, attempt
         FROM webhook_dedup.webhook_outbox_next($1, $2::interval, $3)`, [NOTIFY_TARGET, LEASE, BATCH]);
    for (const intent of rows) await send(intent); // leased to us: send them even when asked to stop
    if (rows.length === 0) await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
  }
  await pool.end();
  console.log('sender stopped');
}

main().catch((err) => {
  console.error(`sender failed: ${err.message}`);
  process.exit(1);
});
