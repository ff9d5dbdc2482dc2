-- The sources with completed keys whose expires_at has come at $1, the
-- oldest first, at most $2 of them: distributed retention goes source by
-- source (src/store/citus.rs). Reads keys_expiry, locks nothing.
SELECT k.source
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'completed' AND k.expires_at OPERATOR(pg_catalog.<=) $1
 GROUP BY k.source
 ORDER BY pg_catalog.min(k.expires_at)
 LIMIT $2
