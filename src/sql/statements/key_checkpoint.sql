-- webhook_checkpoint by the current holder: the last completed step.
-- $1 source, $2 idem_key, $3 now, $4 step, $5 partition_at.
UPDATE webhook_dedup.keys
    SET last_step = $4, last_seen_at = $3
  WHERE partition_at OPERATOR(pg_catalog.=) $5
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
