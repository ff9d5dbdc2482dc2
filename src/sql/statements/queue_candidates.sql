-- The work webhook_next may take: due keys, oldest first. No row locks
-- here: webhook_next takes each key's lock first (trying, not waiting) and
-- only then reads and leases the row, in the same order as every other
-- writer of a key (src/api/queue.rs). $1 now, $2 source (NULL for any),
-- $3 how many candidates to read.
SELECT source, idem_key
  FROM webhook_dedup.keys
 WHERE due_at OPERATOR(pg_catalog.<=) $1
   AND ($2::pg_catalog.text IS NULL OR source OPERATOR(pg_catalog.=) $2)
 ORDER BY due_at
 LIMIT $3
