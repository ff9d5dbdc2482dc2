-- webhook_extend_lease by the current holder.
-- $1 source, $2 idem_key, $3 now, $4 new lease_expires_at, $5 partition_at.
UPDATE webhook_dedup.keys
    SET lease_expires_at = $4, due_at = $4, last_seen_at = $3
  WHERE partition_at OPERATOR(pg_catalog.=) $5
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
