-- The verification keys of a source, oldest first (src/store/secrets.rs
-- caches them per backend). $1 source. Also returns the table's oid, whose
-- invalidation clears the cache.
SELECT s.id, s.secret, s.not_before, s.not_after,
       'webhook_dedup.source_secrets'::pg_catalog.regclass::pg_catalog.oid AS secrets, s.scheme
  FROM (SELECT) AS one
  LEFT JOIN webhook_dedup.source_secrets AS s ON s.source OPERATOR(pg_catalog.=) $1
 ORDER BY s.id
