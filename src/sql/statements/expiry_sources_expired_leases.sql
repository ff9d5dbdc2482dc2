-- The sources with processing keys whose lease expired at $1, the oldest
-- expiry first, at most $2 of them: the distributed lease sweep goes
-- source by source (src/store/citus.rs). Reads keys_open, locks nothing.
SELECT k.source
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'processing' AND k.due_at OPERATOR(pg_catalog.<=) $1
   AND k.lease_expires_at OPERATOR(pg_catalog.<=) $1
 GROUP BY k.source
 ORDER BY pg_catalog.min(k.due_at)
 LIMIT $2
