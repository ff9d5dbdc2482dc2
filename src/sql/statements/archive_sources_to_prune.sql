-- The sources whose payload retention (cut to their key's retention) is
-- shorter than $2, the longest: their archived rows go in paced batches
-- before their partition is dropped. Every row of webhook_dedup.sources,
-- whether it keeps payloads now or did before. $1 webhook_dedup.retention.
SELECT s.source::pg_catalog.text AS source,
       LEAST(COALESCE(s.payload_retention, s.retention, $1), COALESCE(s.retention, $1)) AS retention
  FROM webhook_dedup.sources AS s
 WHERE LEAST(COALESCE(s.payload_retention, s.retention, $1), COALESCE(s.retention, $1)) OPERATOR(pg_catalog.<) $2
 ORDER BY s.source
