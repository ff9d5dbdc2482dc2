-- Delete up to $3 of this node's maintenance runs (started_at) older than
-- $2 (webhook_dedup.retention) at $1; returns how many went
-- (src/maintenance/prune.rs; a table each node keeps for itself, also on a
-- distributed install).
WITH runs AS (
  DELETE FROM webhook_dedup.maintenance_runs AS r
   WHERE r.id OPERATOR(pg_catalog.=) ANY (ARRAY(
     SELECT x.id FROM webhook_dedup.maintenance_runs AS x
      WHERE x.started_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) $2)
      LIMIT $3))
  RETURNING 1
)
SELECT pg_catalog.count(*) AS runs FROM runs
