-- A key's row, locked for this transaction (waits for a concurrent writer;
-- under READ COMMITTED returns the newest row, under REPEATABLE READ raises
-- 40001 if it changed after the snapshot). For the calls that check a
-- token or a state and then write: holders and operators.
-- $1 source, $2 idem_key. Returns the key row (store::KeyRow).
SELECT k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at, k.next_attempt_at,
       k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
  FROM webhook_dedup.keys AS k
 WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1
   FOR NO KEY UPDATE
