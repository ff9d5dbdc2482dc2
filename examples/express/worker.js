'use strict';
// The worker of the persist-then-process variant: server.js started with
// WEBHOOK_MODE=enqueue verifies and stores each delivery and answers 200 at
// once; this process takes the stored deliveries from the queue and runs the
// same two-step job (job.js) on each. Run as many as you like: webhook_next
// never hands the same key to two workers.
//
// Configuration: the libpq variables (PGHOST, PGPORT, PGUSER, PGDATABASE),
// WEBHOOK_LEASE (a PostgreSQL interval; unset: the extension's default),
// WORKER_FAULT=crash-after-claim|crash-after-checkpoint|slow (tests only).
// Stops cleanly on SIGTERM (or Ctrl-C): it finishes the deliveries it holds.

const wd = require('webhook-dedup'); // clients/node: the Worker loop
const { createPool, runJob, subjectOf, parseJson, FAULTS } = require('./job');

const LEASE = process.env.WEBHOOK_LEASE || null;
const FAULT = process.env.WORKER_FAULT || undefined;
const BATCH = 10;
const IDLE_MS = 500; // the pause when nothing is due
const NO_PAYLOAD = "no stored payload: the key was claimed without its body, and its provider's redelivery brings it";

if (FAULT !== undefined && !FAULTS.has(FAULT)) {
  console.error(`WORKER_FAULT must be one of ${[...FAULTS].join(', ')}, not ${FAULT}`);
  process.exit(2);
}

const pool = createPool();

// The event time, read from the body as webhook_receive reads it (the
// provider's profile, webhook_dedup.providers): Stripe's `created` (Unix
// seconds), Standard Webhooks' `timestamp` (RFC 3339); GitHub sends none.
// null when there is none or it does not parse: no subject update. Returns
// timestamptz text for PostgreSQL, microseconds kept (a Date keeps only
// milliseconds). (A source whose event_time_from you set in
// webhook_dedup.sources needs the same change here.)
function eventTimeOf(source, event) {
  if (source === 'stripe') return unixSeconds(event?.created);
  if (source === 'standard') return rfc3339(event?.timestamp);
  return null;
}

// A JSON integer (or its digits in a string), as the profile's unix_seconds.
function unixSeconds(value) {
  const text = typeof value === 'number' || typeof value === 'string' ? String(value).trim() : '';
  if (!/^[0-9]{1,12}$/.test(text)) return null;
  const time = new Date(Number(text) * 1000);
  return time.getUTCFullYear() <= 9999 ? time.toISOString() : null;
}

// An RFC 3339 date-time string (2024-05-01T12:00:00.123456Z, with an offset
// or Z), as the profile's rfc3339: digits past the microsecond are dropped.
// (A leap second, :60, gives null here.)
const RFC3339 = new RegExp('^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})'
  + '(?:\\.([0-9]+))?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))$');

function rfc3339(value) {
  const m = typeof value === 'string' ? RFC3339.exec(value.trim()) : null;
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const [sign, offsetHours, offsetMinutes] = [m[8] ?? '+', m[9] ?? '00', m[10] ?? '00'];
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)
      || hour > 23 || minute > 59 || second > 59 || Number(offsetHours) > 23 || Number(offsetMinutes) > 59) {
    return null; // no such day or time
  }
  const fraction = (m[7] ?? '').slice(0, 6).padEnd(6, '0');
  return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${fraction}${sign}${offsetHours}:${offsetMinutes}`;
}

function daysInMonth(year, month) {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

// One stored delivery, leased to us by webhook_next (wd.Worker's loop). An
// exception in the job (a bug, a constraint, a lost connection) is recorded
// with webhook_fail (retryable, by withClaim in the job or by the Worker):
// the key is handed out again after a backoff, and dead-lettered once its
// attempts run out.
async function processDelivery(row) {
  if (row.payload === null) {
    // webhook_next hands out every due key, and a key claimed without its body
    // (webhook_claim, or webhook_receive in claim mode) whose holder died is
    // due once its lease lapses: there is no payload to run the job on. The
    // Worker records the error as a retryable failure, like any failed job:
    // the provider's redelivery claims it again through the receiver, or its
    // attempts run out into a dead letter.
    throw new Error(NO_PAYLOAD);
  }
  const event = parseJson(row.payload); // payload: the raw body, a Buffer (bytea)
  try {
    const done = await runJob(pool, {
      source: row.source,
      idemKey: row.idemKey,
      claimToken: row.claimToken,
      attempt: row.attempt,
      lastStep: row.lastStep, // 'notified': resume at step 2
      eventType: row.eventType,
      eventTime: eventTimeOf(row.source, event),
      subject: subjectOf(event),
    }, FAULT);
    if (done.completed) {
      console.log(`${row.idemKey}: completed (attempt ${row.attempt})`);
    } else if (done.failed) {
      // rolled back and recorded with webhook_fail (retried after a backoff)
      console.error(`${row.idemKey}: job failed:`, done.failed.message);
    } else {
      // Our lease expired while we worked and another worker took the key;
      // our step was rolled back, and that worker finishes the job.
      console.log(`${row.idemKey}: lease lost, ${done.lost} rolled back`);
    }
  } catch (err) {
    console.error(`${row.idemKey}: job failed:`, err.message);
    throw err; // the Worker records it with webhook_fail
  }
}

// Take up to BATCH due deliveries at a time, each leased to us in its own
// autocommitted statement (the other workers skip these keys, never wait
// for them), one at a time; on SIGTERM finish those in hand, then stop.
const worker = new wd.Worker(pool, processDelivery, {
  lease: LEASE ?? undefined,
  batch: BATCH,
  idleMs: IDLE_MS,
  onError: (err, delivery) => console.error(`${delivery ? delivery.idemKey : 'webhook_next'}: ${err.message}`),
});
const stop = () => worker.stop();
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

console.log(`worker started (lease ${LEASE ?? 'default'}, batch ${BATCH})`);
worker.start().then(async () => {
  await pool.end();
  console.log('worker stopped');
}, (err) => {
  console.error('worker crashed:', err);
  process.exit(1);
});
