-- The key a signed body belongs to. $1 source, $2 SHA-256 of the raw body.
SELECT g.idem_key
  FROM webhook_dedup.replay_guards AS g
 WHERE g.body_sha256 OPERATOR(pg_catalog.=) $2 AND g.source OPERATOR(pg_catalog.=) $1
