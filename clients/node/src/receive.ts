// webhook_receive and http_answer: the calls whose rows a receiver answers
// from. The database decides every status and header; nothing here does.

import { assertExactBytes, Queryable } from './db';

/** What `webhook_receive` made of a delivery (docs/sql-reference.md). The
 * first two are the caller's to process; the others are answered as they
 * are. `null`: refused before a claim (see `Delivery.rejectReason`). */
export type Outcome =
  | 'claimed' | 'reclaimed'
  | 'in_progress' | 'duplicate' | 'conflict' | 'retry_later' | 'unknown_outcome' | 'dead_lettered'
  | 'accepted' | 'handshake' | 'ignored';

/** What becomes of the caller's work, for `httpAnswer`: `completed` (its
 * `webhook_complete` returned true), `lease_lost` (it, or a checkpoint,
 * returned false), `error` (the database could not be asked), `rejected`. */
export type AfterWork = 'completed' | 'lease_lost' | 'error' | 'rejected' | 'missing_event_id' | 'repeated_header' | 'refused_handshake';

/** A JSON value as PostgreSQL's jsonb returns it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The HTTP answer the database computed: status, headers (names to string
 * values, `Content-Type` among them) and the JSON body. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Json;
  /** The outcome of the delivery it answers (`webhook_receive`'s): `sendNode`
   * and `toResponse` send it as the `X-Webhook-Outcome` header. Set by
   * `receive` (null for a delivery refused before a claim: no header) and
   * kept by `answerAfter`; `httpAnswer` answers no delivery and sets none
   * (`{ ...answer, outcome: delivery.outcome }` adds it). */
  outcome?: Outcome | null;
}

/** A request's headers as `webhook_receive` takes them: names (any case) to
 * a value, or to the list of values of a header sent more than once (a
 * provider may sign one of them; joining them with ", " would change it). */
export type HeaderMap = Record<string, string | string[]>;

/** `webhook_receive`'s options, by their SQL names (docs/sql-reference.md). */
export interface ReceiveOptions {
  /** The verification keys; omitted: the source's stored keys (`add_secret`). */
  secrets?: string[];
  /** The source (default: the scheme's name). */
  source?: string;
  environment?: string;
  account?: string;
  operation?: string;
  /** `claim` (process now) or `enqueue` (store for `webhook_next`). */
  mode?: 'claim' | 'enqueue';
  /** A PostgreSQL interval ('30 seconds'); omitted: the source's lease. */
  lease?: string;
  bodyKeyFallback?: boolean;
  tolerance?: string;
  /** The full URL the provider called, for schemes that sign it (twilio,
   * square, hubspot); any other scheme refuses one (22023). */
  url?: string;
  signatureHeader?: string;
  signaturePrefix?: string;
  algorithm?: string;
  encoding?: string;
  method?: string;
  /** How long a copy of a delivery being processed waits for its holder
   * (a PostgreSQL interval; '0': not at all); omitted: the provider's. */
  wait?: string;
}

/** A delivery as `webhook_receive` answered it. */
export interface Delivery {
  verified: boolean;
  rejectReason: string | null;
  outcome: Outcome | null;
  source: string;
  scheme: string;
  idemKey: string | null;
  /** Set when the caller must process (`claimed`, `reclaimed`). */
  claimToken: string | null;
  attempt: number | null;
  /** The stored result of a duplicate. */
  result: Json;
  eventType: string | null;
  /** timestamptz as PostgreSQL's text (microseconds kept), or null. */
  eventTime: string | null;
  /** Where a reclaim resumes (`webhook_checkpoint`'s step). */
  lastStep: string | null;
  secretIndex: number | null;
  /** The answer for this outcome. For `claimed` and `reclaimed` its body is
   * null: answer with `answerAfter` once the work committed. */
  answer: Answer;
  /** True when the caller holds the key and must do the work. */
  mustProcess: boolean;
}

const OPTIONS: [keyof ReceiveOptions, string, string][] = [
  ['secrets', 'secrets', 'text[]'],
  ['source', 'source', 'text'],
  ['environment', 'environment', 'text'],
  ['account', 'account', 'text'],
  ['operation', 'operation', 'text'],
  ['mode', 'mode', 'text'],
  ['lease', 'lease', 'interval'],
  ['bodyKeyFallback', 'body_key_fallback', 'boolean'],
  ['tolerance', 'tolerance', 'interval'],
  ['url', 'url', 'text'],
  ['signatureHeader', 'signature_header', 'text'],
  ['signaturePrefix', 'signature_prefix', 'text'],
  ['algorithm', 'algorithm', 'text'],
  ['encoding', 'encoding', 'text'],
  ['method', 'method', 'text'],
  ['wait', 'wait', 'interval'],
];

/**
 * Verify, key and claim (or enqueue) one delivery in one autocommitted
 * statement: `webhook_dedup.webhook_receive(scheme, body, headers, ...)`.
 * `body` is the raw request body exactly as received (the signature is
 * over these bytes: never a re-serialised parse of it); it is bound as
 * binary `bytea`. `headers` is every request header (`headersFromNode`,
 * `headersFromFetch`). Only the options given (not undefined or null) are
 * sent, by name, so the extension's defaults apply to the rest.
 *
 * Call it on a pool (or a connection outside a transaction): the claim
 * must be committed when this returns, so that a concurrent copy sees it.
 * Errors are the extension's SQL errors (node-postgres `DatabaseError`
 * with `code`, the SQLSTATE: 22023 for a bad argument, 42501 without
 * `webhook_dedup_receiver`, ...).
 */
export async function receive(db: Queryable, scheme: string, body: Buffer | Uint8Array, headers: HeaderMap,
    options: ReceiveOptions | null = {}): Promise<Delivery> {
  assertExactBytes(db);
  options ??= {};
  const values: unknown[] = [scheme, Buffer.isBuffer(body) ? body : Buffer.from(body), JSON.stringify(headers)];
  const named: string[] = [];
  for (const [option, name, type] of OPTIONS) {
    const value = options[option];
    if (value === undefined || value === null) continue; // the extension's default
    values.push(value);
    named.push(`${name} => $${values.length}::${type}`);
  }
  const sql = 'SELECT * FROM webhook_dedup.webhook_receive($1, $2::bytea, $3::jsonb'
    + named.map((n) => `, ${n}`).join('') + ')';
  const { rows: [r] } = await db.query(sql, values);
  const outcome = r.outcome as Outcome | null;
  return {
    verified: r.verified,
    rejectReason: r.reject_reason,
    outcome,
    source: options.source ?? scheme,
    scheme,
    idemKey: r.idem_key,
    claimToken: r.claim_token,
    attempt: r.attempt,
    result: r.result,
    eventType: r.event_type,
    eventTime: r.event_time,
    lastStep: r.last_step,
    secretIndex: r.secret_index,
    answer: { status: r.http_status, headers: r.http_headers, body: r.response, outcome },
    mustProcess: outcome === 'claimed' || outcome === 'reclaimed',
  };
}

/**
 * `webhook_dedup.http_answer(outcome, scheme, result, retry_after, mode)`:
 * the answer to any outcome, and to what became of the work (`completed`,
 * `lease_lost`, `error`). Ask for `error` once at start-up and keep it: when
 * the database fails it cannot be asked.
 */
export async function httpAnswer(db: Queryable, outcome: Outcome | AfterWork,
    options: { scheme?: string; result?: Json; retryAfter?: string; mode?: 'claim' | 'enqueue' } = {}):
    Promise<Answer> {
  const { rows: [r] } = await db.query(
    'SELECT * FROM webhook_dedup.http_answer($1, $2, $3::jsonb, $4::interval, coalesce($5, \'claim\'))',
    // no result (undefined or null): SQL NULL, answered {"status": outcome}
    [outcome, options.scheme ?? null, options.result == null ? null : JSON.stringify(options.result),
      options.retryAfter ?? null, options.mode ?? null]);
  return { status: r.http_status, headers: r.http_headers, body: r.response };
}

/** The answer once the caller's work committed: the claim's status and
 * headers with `result` (as stored by `webhook_complete`, which every later
 * duplicate is answered with) as the body, and the delivery's outcome
 * (`claimed` or `reclaimed`). */
export function answerAfter(delivery: Delivery, result: Json): Answer {
  return { ...delivery.answer, body: result };
}

/** The exact signature of the `webhook_receive` this package calls (the
 * extension 0.2.0 and later). */
export const RECEIVE_SIGNATURE = 'webhook_dedup.webhook_receive(text, bytea, jsonb, text[], text, text, text, text, '
  + 'text, interval, boolean, interval, timestamp with time zone, text, text, text, text, text, text, interval)';

/**
 * Checks at start-up that the database has the extension and that the
 * current role may call `webhook_receive`; throws an Error saying what to
 * do otherwise (so a missing grant is found before the first delivery).
 */
export async function checkInstalled(db: Queryable): Promise<void> {
  const { rows: [p] } = await db.query(
    'SELECT to_regprocedure($1) IS NOT NULL AS installed,'
    + " coalesce(has_function_privilege(to_regprocedure($1), 'EXECUTE'), false) AS allowed,"
    + ' current_database() AS database, current_user AS role', [RECEIVE_SIGNATURE]);
  if (!p.installed) {
    throw new Error(`webhook_dedup is not installed in database ${p.database} (or is too old): `
      + 'run CREATE EXTENSION webhook_dedup (or ALTER EXTENSION webhook_dedup UPDATE)');
  }
  if (!p.allowed) {
    throw new Error(`role ${p.role} may not call webhook_dedup.webhook_receive in database ${p.database}: `
      + `GRANT webhook_dedup_receiver TO ${p.role}`);
  }
}

/**
 * What a receiver does before it listens: connects (an Error "cannot
 * connect to the database: ..." otherwise), checks the extension and the
 * grant (`checkInstalled`), and returns `http_answer('error')`, the answer
 * to send when the database fails later (it cannot be asked then).
 */
export async function prepareReceiver(db: Queryable): Promise<Answer> {
  try {
    await db.query('SELECT 1');
  } catch (err) {
    throw new Error(`cannot connect to the database: ${err instanceof Error ? err.message : String(err)}`);
  }
  await checkInstalled(db);
  return httpAnswer(db, 'error');
}
