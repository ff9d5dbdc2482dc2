-- Repair a key's due_at that disagrees with its state (webhook_next found
-- it due but its state says otherwise); the caller holds the key locked.
-- $1 source, $2 idem_key, $3 due_at.
UPDATE webhook_dedup.keys
   SET due_at = $3
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
