-- webhook_resolve by an operator (the caller holds the key locked).
-- $1 source, $2 idem_key, $3 now, $4 new state, $5 result (kept when NULL),
-- $6 due_at (now for failed and pending, else NULL), $7 expires_at (for
-- completed: now plus the source's retention, else NULL).
UPDATE webhook_dedup.keys
   SET state = $4, result = COALESCE($5, result), due_at = $6,
       next_attempt_at = CASE WHEN $4 OPERATOR(pg_catalog.=) 'failed' THEN $6 END,
       lease_expires_at = NULL, expires_at = $7,
       claim_token = CASE WHEN $4 OPERATOR(pg_catalog.=) 'completed' THEN NULL ELSE claim_token END,
       completed_at = CASE WHEN $4 OPERATOR(pg_catalog.=) 'completed' THEN $3 ELSE completed_at END,
       last_seen_at = $3
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
