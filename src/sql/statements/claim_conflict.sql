-- A delivery of a locked key whose payload differs from its fingerprint:
-- count it on the key and record it in webhook_dedup.conflict_log (read
-- through the view webhook_dedup.conflicts).
-- $1 source, $2 idem_key, $3 now, $4 stored fingerprint, $5 fingerprint,
-- $6 'claim' or 'enqueue'.
WITH counted AS (
  UPDATE webhook_dedup.keys SET conflicts = conflicts OPERATOR(pg_catalog.+) 1
   WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
)
INSERT INTO webhook_dedup.conflict_log (source, idem_key, seen_at, stored_fingerprint, fingerprint, via)
  VALUES ($1, $2, $3, $4, $5, $6)
