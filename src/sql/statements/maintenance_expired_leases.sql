-- Processing keys whose lease expired, oldest expiry first (the sweep of
-- src/maintenance/sweep.rs; index keys_lease_expiry). No row locks: the
-- sweep tries each key's lock, then re-reads the row under it.
-- $1 now, $2 how many.
SELECT source, idem_key
  FROM webhook_dedup.keys
 WHERE state OPERATOR(pg_catalog.=) 'processing'
   AND lease_expires_at OPERATOR(pg_catalog.<=) $1
 ORDER BY lease_expires_at
 LIMIT $2
