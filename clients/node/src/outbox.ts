// The transactional outbox (docs/outbox.md): the intent written in the
// job's transaction, and the sender loop that makes the call and reports it.

import type { Claim } from './claim';
import { LeaseLost } from './claim';
import type { Queryable } from './db';
import type { Json } from './receive';

/** Options of `outboxPut`, by `webhook_outbox_put`'s SQL names. */
export interface OutboxPutOptions {
  /** The downstream key's longest length (32..255; default 255). */
  maxLength?: number;
  /** A preset of `webhook_dedup.downstream_key_limits` (`stripe`, `adyen`,
   * ...), whose limit replaces `maxLength`. */
  downstream?: string;
  /** false for a downstream that takes no idempotency key (most e-mail
   * APIs): a sender lease that lapses then parks the intent as
   * `unknown_outcome` instead of sending it again (default true). */
  downstreamIdempotent?: boolean;
}

/**
 * `webhook_dedup.webhook_outbox_put(source, idem_key, claim_token, operation,
 * target, request, ...)` on `client`, the connection of the job's
 * transaction (`withClaim`'s): the intent to make one downstream call,
 * committed with the business write and the key's completion or with
 * neither. Returns the intent's id (a bigint, as text); the first intent's
 * id when the key has one for `operation` already. Throws `LeaseLost` when
 * the put returns NULL (the claim token no longer holds the key: nothing
 * was written), which `withClaim` turns into a ROLLBACK and `lease_lost`.
 */
export async function outboxPut(client: Queryable, claim: Claim, operation: string, target: string,
    request: Json, options: OutboxPutOptions = {}): Promise<string> {
  const values: unknown[] = [claim.source, claim.idemKey, claim.claimToken, operation, target,
    JSON.stringify(request ?? null)];
  const named: string[] = [];
  for (const [value, name, type] of [
    [options.maxLength, 'max_length', 'integer'],
    [options.downstream, 'downstream', 'text'],
    [options.downstreamIdempotent, 'downstream_idempotent', 'boolean'],
  ] as const) {
    if (value === undefined || value === null) continue;
    values.push(value);
    named.push(`, ${name} => $${values.length}::${type}`);
  }
  const { rows: [row] } = await client.query(
    `SELECT webhook_dedup.webhook_outbox_put($1, $2, $3::uuid, $4, $5, $6::jsonb${named.join('')}) AS id`, values);
  if (row.id === null) throw new LeaseLost();
  return row.id;
}

/** One intent `webhook_outbox_next` leased to a sender. */
export interface OutboxIntent {
  /** The intent's id (a bigint, as node-postgres gives it: text). */
  id: string;
  /** This lease's token: the reports are fenced by it. */
  leaseToken: string;
  /** The downstream idempotency key (`Idempotency-Key`, ...): the same on
   * every attempt. */
  downstreamKey: string;
  target: string;
  operation: string;
  /** What `outboxPut` stored for the call. */
  request: Json;
  /** 1 on the first lease, counting every lease. */
  attempt: number;
  /** timestamptz: PostgreSQL's text with `createPool`. */
  leaseExpiresAt: string | Date;
  /** The event's source and key. */
  source: string;
  idemKey: string;
  /** false: a call that may have been sent is parked, never repeated. */
  downstreamIdempotent: boolean;
}

/** What an error thrown by an `OutboxSender`'s `send` may carry. */
export interface SendFailure {
  /** The downstream's HTTP status: 408, 429 and 5xx are retried, any other
   * (4xx: the request is wrong) dead-letters the intent. */
  status?: number;
  /** Seconds to wait before the retry (the downstream's Retry-After). */
  retryAfter?: number;
  /** false when the request cannot have reached the downstream (a refused
   * connection, a failure before sending): retried. true or not said (a
   * timeout after sending, a reset connection): a downstream without
   * idempotency keys then gets `webhook_outbox_unknown`, never a repeat. */
  sent?: boolean;
}

/** Options of an `OutboxSender`. */
export interface OutboxSenderOptions {
  /** Each intent's lease, a PostgreSQL interval; omitted: its source's
   * lease. Longer than `send` may take (give the call a timeout). */
  lease?: string;
  /** Intents per `webhook_outbox_next` (1..1000, default 1: their leases
   * start together, docs/outbox.md "One call per lease"). */
  batch?: number;
  /** The pause when nothing is due, in ms (default 500). */
  idleMs?: number;
  /** Called when webhook_outbox_next or a report fails (the database is
   * gone: the sender pauses, then goes on; the intent's lease lapses and it
   * is sent again), and with a `LeaseLost` when a report came too late (the
   * lease had lapsed); default: console.error. */
  onError?: (error: unknown, intent?: OutboxIntent) => void;
}

/** The longest retry_after webhook_outbox_fail takes: 365 days. */
const MAX_RETRY_AFTER_SECONDS = 365 * 24 * 3600;

/**
 * The sender of the outbox: takes due intents of `target` (null: every
 * target) with `webhook_outbox_next` (autocommitted: each is leased to this
 * sender with no transaction open during the call; two senders never get
 * one intent), calls `send(intent)` on each, one at a time, and reports:
 *
 * - `send` resolves: `webhook_outbox_ack(id, lease_token, <its value>)`
 *   (the value, JSON, kept as the response; undefined: NULL);
 * - `send` throws an error with a `status` (the downstream answered): 408,
 *   429 and 5xx `webhook_outbox_fail` (retried after `retryAfter` seconds,
 *   else the backoff), any other status `webhook_outbox_fail(retryable =>
 *   false)` (a dead letter: the request is wrong and will stay wrong);
 * - `send` throws without a `status` and without `sent: false` (the request
 *   may have reached the downstream: a timeout after sending, or nobody
 *   said), for an intent whose downstream is not idempotent:
 *   `webhook_outbox_unknown` (parked for a person, never sent again
 *   automatically: at most once, docs/outbox.md);
 * - `send` throws anything else (`sent: false`, or a downstream that
 *   deduplicates by the key): `webhook_outbox_fail`, retried with the same
 *   downstream key.
 *
 * A sender that dies between the call and the report leaves the intent
 * leased; once the lease lapses the next sender repeats the call with the
 * same `downstreamKey` (or, downstream not idempotent, it is parked).
 * `stop()` ends it gracefully: it finishes the intents it holds (sends and
 * reports them: they are leased to it), takes no more, and resolves when
 * the loop has ended.
 */
export class OutboxSender {
  private stopping = false;
  private wake: () => void = () => {};
  private loop: Promise<void> | null = null;

  constructor(private readonly pool: Queryable,
              private readonly target: string | null,
              private readonly send: (intent: OutboxIntent) => Promise<unknown> | unknown,
              private readonly options: OutboxSenderOptions = {}) {}

  /** Starts the loop (once); the returned promise ends with it. */
  start(): Promise<void> {
    this.loop ??= this.run();
    return this.loop;
  }

  /** Stops after the intents in hand; resolves when the loop ended. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.loop;
  }

  private pause(ms: number): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => { clearTimeout(timer); resolve(); };
    });
  }

  private report(error: unknown, intent?: OutboxIntent): void {
    try {
      if (this.options.onError) this.options.onError(error, intent);
      else console.error('webhook-dedup outbox sender:', intent ? `${intent.downstreamKey}:` : 'webhook_outbox_next:', error);
    } catch (reportError) {
      console.error('webhook-dedup outbox sender: onError threw:', reportError);
    }
  }

  private async run(): Promise<void> {
    const idle = this.options.idleMs ?? 500;
    while (!this.stopping) {
      let rows: any[];
      try {
        ({ rows } = await this.pool.query(
          'SELECT * FROM webhook_dedup.webhook_outbox_next($1, $2::interval, $3)',
          [this.target, this.options.lease ?? null, this.options.batch ?? 1]));
      } catch (error) {
        this.report(error);
        await this.pause(idle * 4);
        continue;
      }
      if (rows.length === 0) {
        await this.pause(idle);
        continue;
      }
      // every one, even once stopping: they are leased to this sender, and a
      // lapsed lease of a downstream that is not idempotent parks the intent
      for (const row of rows) {
        await this.deliver({
          id: row.id, leaseToken: row.lease_token, downstreamKey: row.downstream_key, target: row.target,
          operation: row.operation, request: row.request, attempt: row.attempt,
          leaseExpiresAt: row.lease_expires_at, source: row.source, idemKey: row.idem_key,
          downstreamIdempotent: row.downstream_idempotent,
        });
      }
    }
  }

  private async deliver(intent: OutboxIntent): Promise<void> {
    let response: unknown;
    try {
      response = await this.send(intent);
    } catch (error) {
      await this.reportFailure(intent, error);
      return;
    }
    let text: string | null = null;
    try {
      text = response === undefined ? null : JSON.stringify(response) ?? null;
    } catch {
      text = null; // the call was made: acknowledged all the same, without a response
    }
    try {
      const { rows: [row] } = await this.pool.query(
        'SELECT webhook_dedup.webhook_outbox_ack($1, $2::uuid, $3::jsonb) AS ok', [intent.id, intent.leaseToken, text]);
      if (row.ok !== true) this.report(new LeaseLost('webhook-dedup: the ack came after the lease lapsed'), intent);
    } catch (error) {
      this.report(error, intent);
    }
  }

  private async reportFailure(intent: OutboxIntent, error: unknown): Promise<void> {
    const failure = (typeof error === 'object' && error !== null ? error : {}) as SendFailure;
    const status = typeof failure.status === 'number' && Number.isInteger(failure.status) ? failure.status : undefined;
    let message = error instanceof Error ? error.message : String(error);
    if (status !== undefined && !message.startsWith(`HTTP ${status}`)) message = `HTTP ${status}: ${message}`;
    message = message.slice(0, 1000);
    try {
      if (status === undefined && failure.sent !== false && intent.downstreamIdempotent === false) {
        const { rows: [row] } = await this.pool.query(
          'SELECT webhook_dedup.webhook_outbox_unknown($1, $2::uuid, $3) AS ok', [intent.id, intent.leaseToken, message]);
        if (row.ok !== true) this.report(new LeaseLost('webhook-dedup: the report came after the lease lapsed'), intent);
        return;
      }
      const retryable = status === undefined || status === 408 || status === 429 || status >= 500;
      const wait = failure.retryAfter;
      const retryAfter = retryable && typeof wait === 'number' && Number.isFinite(wait) && wait >= 0
        ? Math.min(wait, MAX_RETRY_AFTER_SECONDS) : null;
      const { rows: [row] } = await this.pool.query(
        'SELECT webhook_dedup.webhook_outbox_fail($1, $2::uuid, $3, retryable => $4,'
        + ' retry_after => make_interval(secs => $5::double precision)) AS state',
        [intent.id, intent.leaseToken, message, retryable, retryAfter]);
      if (row.state === null) this.report(new LeaseLost('webhook-dedup: the report came after the lease lapsed'), intent);
    } catch (reportError) {
      this.report(reportError, intent);
    }
  }
}
