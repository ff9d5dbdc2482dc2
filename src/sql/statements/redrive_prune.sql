-- Finished bulk redrives (done or cancelled) past their source's retention
-- ($2: webhook_dedup.retention for sources without their own) at $1, with
-- their keys, at most $3 runs. Returns how many rows went.
WITH gone AS (
  DELETE FROM webhook_dedup.redrives AS r
   WHERE r.id OPERATOR(pg_catalog.=) ANY (ARRAY(
           SELECT x.id FROM webhook_dedup.redrives AS x
             LEFT JOIN webhook_dedup.sources AS s ON s.source OPERATOR(pg_catalog.=) x.source
            WHERE x.finished_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) COALESCE(s.retention, $2))
            LIMIT $3))
  RETURNING r.id
), keys_gone AS (
  DELETE FROM webhook_dedup.redrive_keys AS i USING gone WHERE i.run OPERATOR(pg_catalog.=) gone.id
  RETURNING 1
)
SELECT (SELECT pg_catalog.count(*) FROM gone) OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM keys_gone) AS count
