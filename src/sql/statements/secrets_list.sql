-- The keys of one source ($1), or of all (NULL), without their values:
-- the fingerprint is 'sha256:' and the first 8 hex digits (32 bits) of the
-- SHA-256 of the secret, enough to tell keys apart. $2 now.
SELECT s.id, s.source, s.not_before, s.not_after, s.created_at,
       (s.not_before OPERATOR(pg_catalog.<=) $2
        AND (s.not_after IS NULL OR $2 OPERATOR(pg_catalog.<) s.not_after)) AS valid_now,
       'sha256:' OPERATOR(pg_catalog.||)
         pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(s.secret, 'UTF8')), 'hex'), 8)
         AS fingerprint,
       s.note, s.scheme
  FROM webhook_dedup.source_secrets AS s
 WHERE $1::text IS NULL OR s.source OPERATOR(pg_catalog.=) $1
 ORDER BY s.source, s.id
