-- The work webhook_next takes: due keys (pending, expired leases, due
-- retries), oldest first, each locked for the caller. Keys another worker
-- or a claim holds right now are skipped, never waited for; a skipped key
-- is not locked. Reads keys_open. $1 now, $2 source (NULL for any),
-- $3 how many. Returns the key row (store::KeyRow).
SELECT k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at, k.next_attempt_at,
       k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.<>) 'completed' AND k.due_at OPERATOR(pg_catalog.<=) $1
   AND ($2::pg_catalog.text IS NULL OR k.source OPERATOR(pg_catalog.=) $2)
 ORDER BY k.due_at
 LIMIT $3
   FOR NO KEY UPDATE SKIP LOCKED
