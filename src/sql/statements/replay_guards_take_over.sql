-- Give a signed body to the key $3. The caller holds the guard's row lock
-- (replay_guards_read.sql), so the row is the one it decided on.
-- $1 source, $2 SHA-256 of the raw body, $3 idem_key, $4 now.
-- Returns one row when the guard was there.
UPDATE webhook_dedup.replay_guards AS g
   SET idem_key = $3, seen_at = $4
 WHERE g.body_sha256 OPERATOR(pg_catalog.=) $2 AND g.source OPERATOR(pg_catalog.=) $1
RETURNING true AS taken
