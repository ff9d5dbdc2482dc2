-- webhook_mark_unknown by the current holder: the outcome is unknown.
-- $1 source, $2 idem_key, $3 now, $4 detail, $5 partition_at.
UPDATE webhook_dedup.keys
    SET state = 'unknown_outcome', last_error = $4, lease_expires_at = NULL, due_at = NULL,
        last_seen_at = $3
  WHERE partition_at OPERATOR(pg_catalog.=) $5
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
