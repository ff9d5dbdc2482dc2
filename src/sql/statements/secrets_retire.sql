-- End a key's validity at $3 (exclusive). $1 source, $2 id, $3 not_after.
-- Returns the key's not_before when it exists (the caller checks the
-- order), no row otherwise.
UPDATE webhook_dedup.source_secrets AS s
   SET not_after = $3
 WHERE s.id OPERATOR(pg_catalog.=) $2 AND s.source OPERATOR(pg_catalog.=) $1
RETURNING s.not_before
