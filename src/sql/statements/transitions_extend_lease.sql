-- webhook_extend_lease by the holder (the caller holds the key locked).
-- $1 source, $2 idem_key, $3 now, $4 new lease_expires_at.
UPDATE webhook_dedup.keys
   SET lease_expires_at = $4, due_at = $4, last_seen_at = $3
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
