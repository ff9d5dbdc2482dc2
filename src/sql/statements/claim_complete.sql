-- webhook_complete by the current lease holder.
-- $1 source, $2 idem_key, $3 now, $4 result, $5 partition_at.
UPDATE webhook_dedup.keys
    SET state = 'completed', result = $4, completed_at = $3, last_seen_at = $3,
        lease_expires_at = NULL, due_at = NULL
  WHERE partition_at OPERATOR(pg_catalog.=) $5
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
