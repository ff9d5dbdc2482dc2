-- Repair a key's due_at that disagrees with its state (webhook_next found
-- it due but its state says otherwise). $1 source, $2 idem_key,
-- $3 due_at, $4 partition_at.
UPDATE webhook_dedup.keys
    SET due_at = $3
  WHERE partition_at OPERATOR(pg_catalog.=) $4
    AND source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
