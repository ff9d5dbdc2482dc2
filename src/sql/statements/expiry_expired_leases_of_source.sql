-- expiry_expired_leases.sql for one source only, on a distributed
-- install (src/store/citus.rs): routed to the source's shard, where Citus
-- lets it lock rows. $1 now, $2 how many, $3 source. Returns the key row
-- (store::KeyRow).
SELECT k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at, k.next_attempt_at,
       k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
  FROM webhook_dedup.keys AS k
 WHERE k.source OPERATOR(pg_catalog.=) $3
   AND k.state OPERATOR(pg_catalog.=) 'processing' AND k.due_at OPERATOR(pg_catalog.<=) $1
   AND k.lease_expires_at OPERATOR(pg_catalog.<=) $1
 ORDER BY k.due_at
 LIMIT $2
   FOR NO KEY UPDATE SKIP LOCKED
