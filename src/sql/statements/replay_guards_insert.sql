-- The replay guard of a signed body, if it is new: the body now belongs
-- to the key $3. Of two concurrent first deliveries of one body, the second
-- waits in the primary key for the first's transaction, then inserts
-- nothing. $1 source, $2 SHA-256 of the raw body, $3 idem_key, $4 now.
-- Returns one row when inserted, none when the body had a guard.
INSERT INTO webhook_dedup.replay_guards AS g (source, body_sha256, idem_key, seen_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (body_sha256, source) DO NOTHING
RETURNING true AS inserted
