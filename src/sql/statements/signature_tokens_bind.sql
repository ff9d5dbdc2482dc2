-- Remember a signed token with the body it arrived with, if the token is
-- new. Of two concurrent first uses of one token, the second waits in the
-- primary key for the first's transaction, then inserts nothing (or, if
-- the first rolled back, inserts). $1 source, $2 SHA-256 of the token,
-- $3 SHA-256 of the raw body, $4 the signed time, $5 the end of the
-- signature's window, $6 now. Returns one row when inserted, none when the
-- token was known.
INSERT INTO webhook_dedup.signature_tokens AS t (source, token_sha256, body_sha256, signed_at, window_until, seen_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (token_sha256, source) DO NOTHING
RETURNING true AS inserted
