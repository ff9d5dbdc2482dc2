-- Lease a key the caller holds locked (claim_upsert.sql or queue_take.sql
-- locked it in this transaction): a reclaim, a due retry, a pending key.
-- $1 source, $2 idem_key, $3 now, $4 attempt, $5 claim_token,
-- $6 lease_expires_at, $7 event_type (adopted when the key has none).
UPDATE webhook_dedup.keys
   SET state = 'processing', attempt = $4, claim_token = $5, lease_expires_at = $6, due_at = $6, leased_at = $3,
       next_attempt_at = NULL, event_type = COALESCE(event_type, $7), last_seen_at = $3
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
