-- A claim that changes no state: count the delivery (and a conflict).
-- $1 source, $2 idem_key, $3 now, $4 1 for a conflict else 0, $5 fingerprint,
-- $6 partition_at.
UPDATE webhook_dedup.keys
    SET deliveries = deliveries OPERATOR(pg_catalog.+) 1,
        conflicts = conflicts OPERATOR(pg_catalog.+) $4,
        fingerprint = COALESCE(fingerprint, $5), last_seen_at = $3
  WHERE partition_at OPERATOR(pg_catalog.=) $6
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
