-- The body a known signed token first arrived with (its row is committed:
-- the insert that found it waited for its transaction). Read on the latest
-- snapshot. $1 source, $2 SHA-256 of the token.
SELECT t.body_sha256
  FROM webhook_dedup.signature_tokens AS t
 WHERE t.token_sha256 OPERATOR(pg_catalog.=) $2 AND t.source OPERATOR(pg_catalog.=) $1
