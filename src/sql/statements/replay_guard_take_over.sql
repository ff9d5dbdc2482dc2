-- Give a signed body to the key $3, if it still belongs to $5 (whose
-- processing failed or who is gone). Under READ COMMITTED a concurrent
-- taker is waited for and the condition re-checked on its row, so one
-- taker wins. $1 source, $2 SHA-256 of the raw body, $3 idem_key, $4 now,
-- $5 the key it belonged to. Returns one row when taken over.
UPDATE webhook_dedup.replay_guards AS g
   SET idem_key = $3, seen_at = $4
 WHERE g.body_sha256 OPERATOR(pg_catalog.=) $2 AND g.source OPERATOR(pg_catalog.=) $1
   AND g.idem_key OPERATOR(pg_catalog.=) $5
RETURNING true AS taken
