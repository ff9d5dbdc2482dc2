-- queue_take.sql for one source only, on a distributed install
-- (src/store/citus.rs): the condition on source routes it to the shard
-- that holds the source, where Citus lets it lock rows. $1 now, $2 source,
-- $3 how many. Returns the key row (store::KeyRow).
SELECT k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at, k.next_attempt_at,
       k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
  FROM webhook_dedup.keys AS k
 WHERE k.source OPERATOR(pg_catalog.=) $2
   AND k.state OPERATOR(pg_catalog.<>) 'completed' AND k.due_at OPERATOR(pg_catalog.<=) $1
 ORDER BY k.due_at
 LIMIT $3
   FOR NO KEY UPDATE SKIP LOCKED
