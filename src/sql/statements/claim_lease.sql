-- A claim (or webhook_next) that grants a lease on a stored key: reclaim,
-- a due retry, or a pending key. $1 source, $2 idem_key, $3 now,
-- $4 attempt, $5 claim_token, $6 lease_expires_at, $7 fingerprint,
-- $8 event_type, $9 partition_at (the row's partition), $10 1 when this
-- is a delivery (a claim) rather than the queue handing the key out.
UPDATE webhook_dedup.keys
    SET state = 'processing', attempt = $4, claim_token = $5, lease_expires_at = $6, due_at = $6, leased_at = $3,
        next_attempt_at = NULL, fingerprint = COALESCE(fingerprint, $7),
        event_type = COALESCE(event_type, $8),
        deliveries = deliveries OPERATOR(pg_catalog.+) $10, last_seen_at = $3
  WHERE partition_at OPERATOR(pg_catalog.=) $9
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
