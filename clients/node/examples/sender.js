'use strict';
// sender.js: delivers the 'chat' intents to NOTIFY_URL, the intent's downstream key as
// Idempotency-Key, so that the downstream performs a repeat once (the libpq variables)
const wd = require('webhook-dedup');

async function send(intent) {
  let response;
  try {
    response = await fetch(process.env.NOTIFY_URL, {
      method: 'POST', body: JSON.stringify(intent.request), redirect: 'manual',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': intent.downstreamKey },
      signal: AbortSignal.timeout(10_000),            // well within the lease
    });
  } catch (err) {                                     // refused: not sent; a timeout may have been
    throw Object.assign(err, { sent: err.cause?.code !== 'ECONNREFUSED' });
  }
  if (!response.ok) {                                 // 429 and 5xx are retried, others dead-lettered
    throw Object.assign(new Error(`HTTP ${response.status}`),
      { status: response.status, retryAfter: Number.parseInt(response.headers.get('retry-after'), 10) });
  }
  return response.json().catch(() => null);           // acknowledged, kept as the intent's response
}

const pool = wd.createPool();
const sender = new wd.OutboxSender(pool, 'chat', send, { lease: '1 minute', batch: 1 });
sender.start().then(() => pool.end());
process.on('SIGTERM', () => sender.stop());           // sends and reports the intent in hand, then ends
