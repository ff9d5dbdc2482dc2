-- webhook_checkpoint by the holder (the caller holds the key locked).
-- $1 source, $2 idem_key, $3 now, $4 step.
UPDATE webhook_dedup.keys
   SET last_step = $4, last_seen_at = $3
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
