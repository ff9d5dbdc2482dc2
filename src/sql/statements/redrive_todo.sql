-- The next keys of run $1 not moved or skipped yet, in order, at most $2
-- (index redrive_keys_todo).
SELECT i.n, i.idem_key::pg_catalog.text AS idem_key, i.conflict_at
  FROM webhook_dedup.redrive_keys AS i
 WHERE i.run OPERATOR(pg_catalog.=) $1 AND i.outcome IS NULL
 ORDER BY i.n
 LIMIT $2
