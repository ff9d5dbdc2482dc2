-- Delete up to $3 delivered intents past their source's retention
-- (delivered_at + retention <= now; webhook_dedup.sources.retention, else
-- webhook_dedup.retention), oldest first, skipping rows someone holds.
-- Undelivered intents (pending, in flight, failed, parked) are never
-- deleted. $1 now, $2 webhook_dedup.retention, $3 how many, $4 the
-- shortest retention of any source (the index bound). Returns how many went.
WITH gone AS (
  DELETE FROM webhook_dedup.outbox AS o
   WHERE o.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
     SELECT x.ctid FROM webhook_dedup.outbox AS x
      WHERE x.state OPERATOR(pg_catalog.=) 'completed'
        AND x.delivered_at OPERATOR(pg_catalog.<=) ($1 OPERATOR(pg_catalog.-) $4)  -- outbox_delivered (BRIN)
        AND x.delivered_at OPERATOR(pg_catalog.<=) ($1 OPERATOR(pg_catalog.-) COALESCE(
              (SELECT s.retention FROM webhook_dedup.sources AS s
                WHERE s.source OPERATOR(pg_catalog.=) x.source), $2))
      ORDER BY x.delivered_at
      LIMIT $3 FOR UPDATE OF x SKIP LOCKED))
  RETURNING 1
)
SELECT pg_catalog.count(*) FROM gone
