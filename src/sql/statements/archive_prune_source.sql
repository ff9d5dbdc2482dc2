-- Paced removal (src/maintenance/archive.rs): delete the oldest archived
-- deliveries of source $1 that arrived before $2, about $3 of them (the
-- rows up to the $3-th oldest's arrival time, so a few more when several
-- arrived in the same microsecond). Each partition's index (source, received_at).
-- Returns how many.
WITH edge AS (
  SELECT a.received_at FROM webhook_dedup.archive AS a
   WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.<) $2
   ORDER BY a.received_at
  OFFSET $3 OPERATOR(pg_catalog.-) 1 LIMIT 1
), gone AS (
  DELETE FROM webhook_dedup.archive AS a
   WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.<) $2
     AND a.received_at OPERATOR(pg_catalog.<=) COALESCE((SELECT e.received_at FROM edge AS e), $2)
  RETURNING 1
)
SELECT pg_catalog.count(*) AS count FROM gone
