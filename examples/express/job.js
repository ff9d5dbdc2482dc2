'use strict';
// The job every delivery runs, shared by the receiver (server.js) and the
// worker (worker.js), and the database pool they both use.
//
// The job has two steps, and each must happen exactly once even when this
// process dies at any point. The trick: a step commits its own writes
// together with its record in webhook_dedup, in ONE transaction:
//
//   1. BEGIN; SELECT webhook_dedup.webhook_outbox_put(source, key, claim_token,
//                        'notify', 'notifications', request);   -- the notification's intent
//             SELECT webhook_dedup.webhook_checkpoint(source, key, claim_token, 'notified');
//      COMMIT
//   2. BEGIN; INSERT INTO shop.side_effects ... RETURNING id;
//             INSERT INTO shop.subjects ... ON CONFLICT DO UPDATE;
//             SELECT webhook_dedup.webhook_complete(source, key, claim_token, result);
//      COMMIT
//
// The step and its record commit together or not at all. Committed apart,
// a crash between the two would make the retry redo the step (if the step
// came first) or skip a step that never happened (if the record came first).
//
// webhook_checkpoint and webhook_complete return false when our lease
// expired and another worker reclaimed the key: the step is then that
// worker's to do, so we ROLLBACK ours (and the receiver answers
// webhook_dedup.http_answer('lease_lost'): 503).
//
// If the process dies, whatever it had not committed is gone; once the lease
// expires, the provider's retry (or another worker) reclaims the key with
// last_step = 'notified' if step 1 had committed, and resumes at step 2.

const wd = require('webhook-dedup');

const NOTIFIED = 'notified'; // the checkpoint of step 1
// Step 1's outbox intent: its operation (one notification per event: part of
// its downstream idempotency key) and the senders that take it (sender.js).
const NOTIFY_OPERATION = 'notify';
const NOTIFY_TARGET = 'notifications';
const CRASH_AFTER_CLAIM = 'crash-after-claim';
const CRASH_AFTER_CHECKPOINT = 'crash-after-checkpoint';
// A slow job: sleep this long between the steps (holding the claim, no
// lock), so that a copy of the delivery arrives while it is processed.
const SLOW = 'slow';
const SLOW_SECONDS = 3;
const FAULTS = new Set([CRASH_AFTER_CLAIM, CRASH_AFTER_CHECKPOINT, SLOW]);

// One pool per process (the webhook-dedup package's: timestamps stay
// PostgreSQL's text, so an event time goes back to the monotonic guard to
// the microsecond). node-postgres reads the libpq environment variables
// (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD); PGHOST may be a Unix
// socket directory (/var/run/postgresql).
function createPool() {
  return wd.createPool({ max: 10, application_name: 'webhook-dedup-express' });
}

// Runs work(client) in one transaction: COMMIT when it returns true,
// ROLLBACK when it returns false or throws (the package's).
const { inTransaction } = wd;

// Fault injection (tests only): die like `kill -9`, at once, awaiting
// nothing: no answer, no ROLLBACK, no clean-up. The database sees the
// connection drop and rolls back whatever was not committed.
function die(fault) {
  console.error(`fault injection: ${fault}: exiting now, like kill -9`);
  process.exit(137);
}

// The object the event is about, read from the body: data.object.id
// (Stripe), else data.id (Standard Webhooks' convention), else none (GitHub).
// `event` is the parsed body (null when it is not JSON).
function subjectOf(event) {
  const id = event?.data?.object?.id ?? event?.data?.id;
  return typeof id === 'string' || typeof id === 'number' ? String(id) : null;
}

// The body as JSON, or null. Only to read the subject and the event time:
// the signature was verified over the raw bytes, before any parsing.
function parseJson(body) {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
}

// Runs the two steps for one claimed key. `job` holds what webhook_receive
// or webhook_next returned: source, idemKey, claimToken, attempt, lastStep,
// eventType, eventTime (timestamptz text or null), subject (or null).
// `fault` is a fault to inject (tests only: a crash, or a slow job); it
// fires on attempt 1 only, so the retry is processed normally.
//
// Resolves to { completed: true, result, resumedFrom }; when the lease was
// lost, { completed: false, lost: 'notification' | 'side effect' }; when
// step 2 threw (rolled back, recorded with webhook_fail by withClaim),
// { completed: false, failed: error }. An error of step 1 is thrown.
async function runJob(pool, job, fault) {
  const injected = job.attempt === 1 ? fault : undefined;
  const key = [job.source, job.idemKey, job.claimToken];
  let resumedFrom = null;

  if (job.lastStep === NOTIFIED) {
    // A reclaim after a crash that followed step 1's COMMIT: step 1 is done.
    resumedFrom = NOTIFIED;
  } else {
    // Step 1: the notification's outbox intent and its checkpoint, in one
    // transaction. The notification is a call to another service (an
    // e-mail API), which cannot join this transaction: what commits here is
    // the intent to send it (docs/outbox.md), which sender.js delivers with
    // a downstream idempotency key derived from the event.
    const notified = await inTransaction(pool, async (client) => {
      // First: fenced by our claim token, it takes the key's row lock, which
      // a concurrent reclaim of this key then waits for until our COMMIT.
      // NULL: our lease was reclaimed (nothing written).
      const { rows: [put] } = await client.query(
        'SELECT webhook_dedup.webhook_outbox_put($1, $2, $3, $4, $5, $6::jsonb) AS id',
        [...key, NOTIFY_OPERATION, NOTIFY_TARGET,
          JSON.stringify({ source: job.source, idem_key: job.idemKey, event_type: job.eventType })]);
      if (injected === CRASH_AFTER_CLAIM) die(injected); // BEGIN and the intent sent, no COMMIT
      const { rows } = await client.query(
        'SELECT webhook_dedup.webhook_checkpoint($1, $2, $3, $4) AS ok', [...key, NOTIFIED]);
      return put.id !== null && rows[0].ok; // false: another worker holds the key now: ROLLBACK
    });
    if (!notified) return { completed: false, lost: 'notification' };
    if (injected === CRASH_AFTER_CHECKPOINT) die(injected); // step 1 committed, step 2 not begun
    if (injected === SLOW) await new Promise((resolve) => setTimeout(resolve, SLOW_SECONDS * 1000));
  }

  // Step 2: the side effect and the subject's new state, committed with
  // the key's completion in one transaction (wd.withClaim: the job, then
  // webhook_complete; ROLLBACK when the completion finds our lease taken
  // over; an error thrown by the job rolls it back and is recorded with
  // webhook_fail, retryable, then thrown again here).
  const done = await wd.withClaim(pool, job, async (client) => {
    const { rows: [effect] } = await client.query(
      'INSERT INTO shop.side_effects (source, idem_key, event_type, attempt) VALUES ($1, $2, $3, $4) RETURNING id',
      [job.source, job.idemKey, job.eventType, job.attempt]);
    if (job.subject && job.eventTime) {
      // Providers deliver out of order. The table's trigger
      // webhook_monotonic_guard skips this update when the stored event is
      // newer (zero rows, no error): a late, stale event is processed (it got
      // its side effect above) but does not move its subject back.
      await client.query(
        `INSERT INTO shop.subjects (source, subject, last_event_type, source_updated_at)
         VALUES ($1, $2, $3, $4::timestamptz)
         ON CONFLICT (source, subject) DO UPDATE
           SET last_event_type = EXCLUDED.last_event_type,
               source_updated_at = EXCLUDED.source_updated_at`,
        [job.source, job.subject, job.eventType, job.eventTime]);
    }
    // The result is what every later duplicate is answered with; withClaim
    // returns it as PostgreSQL stored it (jsonb), so the first answer and the
    // duplicates' are the same bytes. (id is a bigint, which node-postgres
    // returns as a string.)
    return { status: 200, side_effect_id: Number(effect.id) };
  });
  // failed: rolled back and recorded with webhook_fail by withClaim already
  if (done.status === 'failed') return { completed: false, failed: done.error };
  if (done.status === 'lease_lost') return { completed: false, lost: 'side effect' };
  return { completed: true, result: done.result, resumedFrom };
}

// The job of a delivery webhook_receive claimed for us (wd.receive's
// Delivery) with its raw body; `fault` as runJob's (a header's value, tests
// only: anything but a known fault is none). A job that failed (recorded
// with webhook_fail) is thrown, for the receiver's error answer (500).
async function runReceived(pool, delivery, body, fault) {
  const done = await runJob(pool, {
    source: delivery.source, // the source defaults to the scheme's name
    idemKey: delivery.idemKey,
    claimToken: delivery.claimToken,
    attempt: delivery.attempt,
    lastStep: delivery.lastStep,
    eventType: delivery.eventType,
    eventTime: delivery.eventTime,
    subject: subjectOf(parseJson(body)),
  }, FAULTS.has(fault) ? fault : undefined);
  if (done.failed) throw done.failed;
  return done;
}

module.exports = { createPool, runJob, runReceived, subjectOf, parseJson, FAULTS, NOTIFY_TARGET };
