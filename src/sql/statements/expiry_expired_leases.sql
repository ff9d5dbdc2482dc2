-- Processing keys whose lease expired, oldest expiry first, each locked
-- for the sweep (src/maintenance/sweep.rs); keys a claim or their holder
-- holds right now are skipped (a processing key's due_at is its lease
-- expiry: keys_open). $1 now, $2 how many. Returns the key row
-- (store::KeyRow).
SELECT k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at, k.next_attempt_at,
       k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'processing' AND k.due_at OPERATOR(pg_catalog.<=) $1
   AND k.lease_expires_at OPERATOR(pg_catalog.<=) $1
 ORDER BY k.due_at
 LIMIT $2
   FOR NO KEY UPDATE SKIP LOCKED
