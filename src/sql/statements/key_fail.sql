-- webhook_fail by the current holder: to failed (due at $4) or dead_lettered
-- ($4 NULL); also a claim or webhook_next dead-lettering a key that is due
-- again with no attempts left. $1 source, $2 idem_key, $3 now,
-- $4 next_attempt_at, $5 state, $6 error, $7 partition_at, $8 1 when this
-- is a delivery (a claim), else 0.
UPDATE webhook_dedup.keys
    SET state = $5, next_attempt_at = $4, due_at = $4, last_error = $6, lease_expires_at = NULL,
        deliveries = deliveries OPERATOR(pg_catalog.+) $8, last_seen_at = $3
  WHERE partition_at OPERATOR(pg_catalog.=) $7
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
