-- A key the caller holds locked becomes failed (due at $4) or
-- dead_lettered ($4 NULL): webhook_fail by the holder, the lease sweep, or
-- a claim or webhook_next finding it due with no attempts left.
-- $1 source, $2 idem_key, $3 now, $4 next_attempt_at, $5 state, $6 error.
UPDATE webhook_dedup.keys
   SET state = $5, next_attempt_at = $4, due_at = $4, last_error = $6, lease_expires_at = NULL, last_seen_at = $3
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
