-- The rows of one partition of webhook_dedup.keys past retention, and how
-- many of them are completed keys still within their source's retention
-- (src/maintenance/partitions.rs decides from these whether to drop it).
-- $1 lower bound, $2 upper bound, $3 now, $4 webhook_dedup.retention.
SELECT pg_catalog.count(*) AS total,
       pg_catalog.count(*) FILTER (
         WHERE k.state OPERATOR(pg_catalog.=) 'completed'
           AND k.last_seen_at OPERATOR(pg_catalog.>=) ($3 OPERATOR(pg_catalog.-) COALESCE(
                 (SELECT s.retention FROM webhook_dedup.sources AS s
                   WHERE s.source OPERATOR(pg_catalog.=) k.source), $4))) AS retained
  FROM webhook_dedup.keys AS k
 WHERE k.partition_at OPERATOR(pg_catalog.>=) $1 AND k.partition_at OPERATOR(pg_catalog.<) $2
