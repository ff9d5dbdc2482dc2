// The work of a claimed key, committed with its completion, and the queue
// worker that takes stored deliveries.

import type pg from 'pg';
import { inTransaction } from './db';
import type { Json } from './receive';

/** A key the caller holds: what `webhook_receive`, `webhook_claim` or
 * `webhook_next` returned for it. */
export interface Claim {
  source: string;
  idemKey: string;
  claimToken: string;
  attempt?: number | null;
  /** Where a reclaim resumes (`webhook_checkpoint`'s last step). */
  lastStep?: string | null;
}

/**
 * Thrown by a job to end `withClaim` as `lease_lost`: the job found that its
 * claim token no longer holds the key (`webhook_outbox_put` returned NULL,
 * `webhook_checkpoint` false; `outboxPut` throws it itself). `withClaim`
 * rolls the transaction back and returns `{ status: 'lease_lost' }` without
 * calling `webhook_fail`: the key is another worker's now.
 */
export class LeaseLost extends Error {
  constructor(message = 'webhook-dedup: the lease was lost: another worker holds the key (or the intent) now') {
    super(message);
    this.name = 'LeaseLost';
  }
}

/** What became of the work: `completed` with the stored result;
 * `lease_lost` (the lease expired and another worker reclaimed the key, or
 * the job threw `LeaseLost`: the job's writes were rolled back, the key is
 * that worker's); `failed`
 * (the job threw: rolled back, recorded with `webhook_fail`, whose new
 * state is `state`, `failed` or `dead_lettered`, or null when the token
 * was stale by then). */
export type ClaimOutcome =
  | { status: 'completed'; result: Json }
  | { status: 'lease_lost' }
  | { status: 'failed'; error: unknown; state: string | null };

/** Options of `withClaim`. */
export interface WithClaimOptions {
  /** `webhook_fail`'s `retryable` for an error the job threw (default:
   * true: retried after a backoff until the source's max_attempts, then
   * dead-lettered). A function decides per error. */
  retryable?: boolean | ((error: unknown) => boolean);
}

/**
 * Runs `job(client, claim)` and `webhook_complete(source, idem_key,
 * claim_token, result)` in ONE transaction on one connection: the job's
 * writes and the key's completion commit together or not at all, so a
 * crash anywhere leaves either both (later copies are duplicates answered
 * with `result`) or neither (the retry does the job again). `job` returns
 * the result to store (JSON; what every duplicate is answered with).
 *
 * - `webhook_complete` returns false (the lease expired and another worker
 *   reclaimed the key), or the job throws `LeaseLost` (its
 *   `webhook_outbox_put` returned NULL: `outboxPut` throws it):
 *   ROLLBACK, `{ status: 'lease_lost' }`, no `webhook_fail`.
 * - `job` throws: ROLLBACK, then `webhook_fail` (retryable per the options)
 *   outside the transaction, `{ status: 'failed', error, state }`; an error
 *   of webhook_fail itself (the database is gone) is thrown: the lease
 *   then expires and the key is retried.
 *
 * The result comes back from PostgreSQL as jsonb, exactly as a duplicate
 * reads it (jsonb does not keep the key order of the text it was given).
 */
export async function withClaim(pool: pg.Pool, claim: Claim,
    job: (client: pg.PoolClient, claim: Claim) => Promise<Json>,
    options: WithClaimOptions = {}): Promise<ClaimOutcome> {
  let result: Json = null;
  try {
    const completed = await inTransaction(pool, async (client) => {
      const value = await job(client, claim);
      // undefined (no return) is stored as JSON null; a value JSON cannot
      // encode (a function, a toJSON giving undefined) is the job's error
      const text = value === undefined ? 'null' : JSON.stringify(value);
      if (text === undefined) throw new TypeError('webhook-dedup: the job returned a value JSON cannot encode');
      const { rows: [done] } = await client.query(
        'SELECT webhook_dedup.webhook_complete($1, $2, $3, $4::jsonb) AS completed, $4::jsonb AS result',
        [claim.source, claim.idemKey, claim.claimToken, text]);
      result = done.result;
      return done.completed === true;
    });
    return completed ? { status: 'completed', result } : { status: 'lease_lost' };
  } catch (error) {
    if (error instanceof LeaseLost) return { status: 'lease_lost' }; // rolled back; the key is not ours
    const retryable = typeof options.retryable === 'function'
      ? options.retryable(error) : options.retryable ?? true;
    const message = error instanceof Error ? error.message : String(error);
    const { rows: [failed] } = await pool.query(
      'SELECT webhook_dedup.webhook_fail($1, $2, $3, $4, retryable => $5) AS state',
      [claim.source, claim.idemKey, claim.claimToken, message.slice(0, 1000), retryable]);
    return { status: 'failed', error, state: failed.state };
  }
}

/** A delivery `webhook_next` handed out: the key, leased to this worker,
 * with the stored raw body and headers. */
export interface QueuedDelivery extends Claim {
  attempt: number;
  payload: Buffer | null;
  eventType: string | null;
  headers: Json;
}

/** Options of a `Worker`. */
export interface WorkerOptions {
  /** Take only this source's keys (default: every source). */
  source?: string;
  /** A PostgreSQL interval; omitted: the source's lease. */
  lease?: string;
  /** Keys per `webhook_next` call (1..1000, default 10). */
  batch?: number;
  /** The pause when nothing is due, in ms (default 500). */
  idleMs?: number;
  /** Called when webhook_next, or the webhook_fail after a handler threw,
   * fails (the database is gone: the worker pauses, then goes on; the key's
   * lease expires and it is handed out again); default: console.error. */
  onError?: (error: unknown, delivery?: QueuedDelivery) => void;
}

/**
 * The worker of the persist-then-process mode: takes due deliveries with
 * `webhook_next` (each leased to it; two workers never get one key) and
 * calls `handler` on each, one at a time. The handler does the work and
 * completes the key, usually with `withClaim` (the job and
 * `webhook_complete` in one transaction); one that throws has its key
 * recorded with `webhook_fail` (retryable: handed out again after a
 * backoff, dead-lettered once the source's max_attempts are spent). Run as
 * many workers as you like. `stop()` ends it gracefully: it finishes the
 * deliveries it holds (they are leased to it), takes no more, and resolves
 * when the loop has ended.
 */
export class Worker {
  private stopping = false;
  private wake: () => void = () => {};
  private loop: Promise<void> | null = null;

  constructor(private readonly pool: pg.Pool,
              private readonly handler: (delivery: QueuedDelivery) => Promise<unknown>,
              private readonly options: WorkerOptions = {}) {}

  /** Starts the loop (once); the returned promise ends with it. */
  start(): Promise<void> {
    this.loop ??= this.run();
    return this.loop;
  }

  /** Stops after the deliveries in hand; resolves when the loop ended. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.loop;
  }

  private pause(ms: number): Promise<void> {
    if (this.stopping) return Promise.resolve(); // stop() came while webhook_next ran
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => { clearTimeout(timer); resolve(); };
    });
  }

  /** onError, or the console when none is given; an onError that throws
   * does not end the loop. */
  private report(error: unknown, delivery?: QueuedDelivery): void {
    try {
      if (this.options.onError) this.options.onError(error, delivery);
      else console.error('webhook-dedup worker:', delivery ? `${delivery.idemKey}:` : 'webhook_next:', error);
    } catch (reportError) {
      console.error('webhook-dedup worker: onError threw:', reportError);
    }
  }

  private async run(): Promise<void> {
    const idle = this.options.idleMs ?? 500;
    while (!this.stopping) {
      let rows: any[];
      try {
        // autocommitted: the leases are visible to the other workers at once
        ({ rows } = await this.pool.query(
          'SELECT * FROM webhook_dedup.webhook_next(source => $1, lease => $2::interval, batch => $3)',
          [this.options.source ?? null, this.options.lease ?? null, this.options.batch ?? 10]));
      } catch (error) {
        this.report(error);
        await this.pause(idle * 4);
        continue;
      }
      if (rows.length === 0) {
        await this.pause(idle);
        continue;
      }
      // all of them, even once stopping: they are leased to this worker
      for (const row of rows) {
        const delivery: QueuedDelivery = {
          source: row.source, idemKey: row.idem_key, claimToken: row.claim_token, attempt: row.attempt,
          lastStep: row.last_step, payload: row.payload, eventType: row.event_type, headers: row.headers,
        };
        try {
          await this.handler(delivery);
        } catch (error) {
          if (error instanceof LeaseLost) continue; // the key is another worker's: nothing to record
          const message = error instanceof Error ? error.message : String(error);
          try {
            await this.pool.query('SELECT webhook_dedup.webhook_fail($1, $2, $3, $4, retryable => true)',
              [delivery.source, delivery.idemKey, delivery.claimToken, message.slice(0, 1000)]);
          } catch (failError) {
            this.report(failError, delivery);
          }
        }
      }
    }
  }
}
