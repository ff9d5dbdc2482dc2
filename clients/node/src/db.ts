// The database side: a pool that keeps what webhook_dedup returns exact, and
// the check that the driver binds a body's bytes as they are.

import pg from 'pg';

/** What the calls here need of a connection or a pool: node-postgres's
 * `query(text, values)`. A `pg.Pool`, `pg.Client` or `pg.PoolClient`. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

const TIMESTAMPTZ_OID = 1184;

/**
 * A `pg.Pool` (its `config` as node-postgres's, the libpq environment
 * variables PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD otherwise) that
 * returns `timestamptz` as PostgreSQL's text: a JavaScript `Date` keeps
 * milliseconds only, and an event time sent back to PostgreSQL (the
 * out-of-order guard compares it to the microsecond) must be the one it gave.
 * An idle connection that breaks (a database restart) is logged and
 * replaced instead of crashing the process.
 */
export function createPool(config: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({
    application_name: 'webhook-dedup',
    ...config,
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        oid === TIMESTAMPTZ_OID
          ? (text: string) => text
          : (pg.types.getTypeParser as (o: number, f?: string) => unknown)(oid, format)) as any,
    },
  });
  pool.on('error', (err) => console.error('webhook-dedup: idle database connection lost:', err.message));
  return pool;
}

/**
 * Refuses a driver that would not send a body's bytes as they are. pg-native
 * (node-postgres's libpq binding, `require('pg').native`) passes parameters
 * as C strings, so a Buffer is cut at its first zero byte
 * (brianc/node-postgres#3779): a signed body with a zero byte would then fail
 * verification, or be stored cut. Throws a TypeError for such a pool or
 * client; the pure-JavaScript `pg` sends a Buffer as binary `bytea`.
 */
export function assertExactBytes(db: Queryable): void {
  const candidate = db as { native?: { query?: unknown }; Client?: unknown };
  // a client (or a pool's client) of pg-native carries its libpq binding
  const nativeClient = typeof candidate.native?.query === 'function';
  // a pool of them: pg.native.Pool's Client (pg.native is null without pg-native)
  const native = (pg as unknown as { native: { Client: unknown } | null }).native;
  const nativePool = native !== null && candidate.Client !== undefined && candidate.Client === native.Client;
  if (nativeClient || nativePool) {
    throw new TypeError('webhook-dedup: pg-native cuts a Buffer parameter at its first zero byte '
      + '(brianc/node-postgres#3779); use the pure-JavaScript pg driver');
  }
}

/**
 * Runs `work(client)` in one transaction on one connection of `pool`:
 * COMMIT when it returns true, ROLLBACK when it returns false or throws
 * (the error is thrown again). A connection whose ROLLBACK failed is closed,
 * not returned to the pool.
 */
export async function inTransaction(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<boolean>):
    Promise<boolean> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // A checked-out client has no 'error' listener of the pool's: a backend
  // that dies meanwhile (a restart, idle_in_transaction_session_timeout,
  // pg_terminate_backend) would emit 'error' unheard, which ends the Node
  // process. The query in flight rejects all the same; the connection is
  // closed, not reused.
  const onError = (err: Error) => { broken = err; };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const commit = await work(client);
    await client.query(commit ? 'COMMIT' : 'ROLLBACK');
    return commit;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollbackErr: Error) => { broken = rollbackErr; });
    throw err;
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}
