-- Retention (src/maintenance/expiry.rs): up to $3 completed keys whose
-- expires_at has come, oldest first (keys_expiry), each locked (keys a
-- delivery holds right now are skipped; a recent duplicate answered with a
-- read holds nothing, and is ordered before a deletion that commits after
-- it). A key not active since its
-- source's retention (last_seen_at + retention <= now) is deleted with its
-- payload; one that was (a late duplicate) or whose source's retention
-- grew is kept, and looked at again when that retention ends.
-- $1 now, $2 webhook_dedup.retention (sources without their own), $3 how many.
-- Returns how many keys were looked at, deleted and kept.
WITH due AS MATERIALIZED (
  SELECT k.idem_key, k.source,
         k.last_seen_at OPERATOR(pg_catalog.+) COALESCE(s.retention, $2) AS keep_until
    FROM webhook_dedup.keys AS k
    LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) k.source
   WHERE k.state OPERATOR(pg_catalog.=) 'completed' AND k.expires_at OPERATOR(pg_catalog.<=) $1
   ORDER BY k.expires_at
   LIMIT $3
     FOR UPDATE OF k SKIP LOCKED
), gone AS (
  DELETE FROM webhook_dedup.keys AS k
   USING due
   WHERE k.idem_key OPERATOR(pg_catalog.=) due.idem_key AND k.source OPERATOR(pg_catalog.=) due.source
     AND due.keep_until OPERATOR(pg_catalog.<=) $1
  RETURNING k.idem_key, k.source
), payloads AS (
  DELETE FROM webhook_dedup.payloads AS p
   USING gone
   WHERE p.idem_key OPERATOR(pg_catalog.=) gone.idem_key AND p.source OPERATOR(pg_catalog.=) gone.source
), kept AS (
  UPDATE webhook_dedup.keys AS k
     SET expires_at = due.keep_until
    FROM due
   WHERE k.idem_key OPERATOR(pg_catalog.=) due.idem_key AND k.source OPERATOR(pg_catalog.=) due.source
     AND due.keep_until OPERATOR(pg_catalog.>) $1
  RETURNING 1
)
SELECT (SELECT pg_catalog.count(*) FROM due) AS looked_at,
       (SELECT pg_catalog.count(*) FROM gone) AS deleted,
       (SELECT pg_catalog.count(*) FROM kept) AS kept
