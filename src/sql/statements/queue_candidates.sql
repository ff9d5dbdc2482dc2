-- The work webhook_next may take: due keys, oldest first, skipping rows
-- another worker has locked. $1 now, $2 source (NULL for any), $3 how many.
SELECT source, idem_key
  FROM webhook_dedup.keys
 WHERE due_at OPERATOR(pg_catalog.<=) $1
   AND ($2::pg_catalog.text IS NULL OR source OPERATOR(pg_catalog.=) $2)
 ORDER BY due_at
 LIMIT $3
   FOR UPDATE SKIP LOCKED
