-- webhook_fail by the current holder: to failed (due at $4) or dead_lettered
-- ($4 NULL). $1 source, $2 idem_key, $3 now, $4 next_attempt_at,
-- $5 state, $6 error, $7 partition_at.
UPDATE webhook_dedup.keys
    SET state = $5, next_attempt_at = $4, due_at = $4, last_error = $6, lease_expires_at = NULL,
        last_seen_at = $3
  WHERE partition_at OPERATOR(pg_catalog.=) $7
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
