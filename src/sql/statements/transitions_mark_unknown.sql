-- webhook_mark_unknown by the holder (the caller holds the key locked).
-- $1 source, $2 idem_key, $3 now, $4 detail.
UPDATE webhook_dedup.keys
   SET state = 'unknown_outcome', last_error = $4, lease_expires_at = NULL, due_at = NULL, last_seen_at = $3
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
