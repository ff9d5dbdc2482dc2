-- The key a signed body belongs to, locked until the transaction ends: a
-- redelivery of that key holds it while it claims, so a delivery that
-- would take the body over waits for it (and then sees what it did).
-- $1 source, $2 SHA-256 of the raw body.
SELECT g.idem_key
  FROM webhook_dedup.replay_guards AS g
 WHERE g.body_sha256 OPERATOR(pg_catalog.=) $2 AND g.source OPERATOR(pg_catalog.=) $1
   FOR NO KEY UPDATE
