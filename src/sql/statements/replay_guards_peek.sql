-- The key a signed body belongs to, read without a lock (src/store/
-- replay_guards.rs owner_unlocked): a recent duplicate of that key is
-- answered with reads alone, where the locking read
-- (replay_guards_read.sql) would take a transaction id and write.
-- $1 source, $2 SHA-256 of the raw body.
SELECT g.idem_key
  FROM webhook_dedup.replay_guards AS g
 WHERE g.body_sha256 OPERATOR(pg_catalog.=) $2 AND g.source OPERATOR(pg_catalog.=) $1
