-- The sources with keys due at $1 (pending, expired leases, due retries),
-- the one with the oldest due key first, at most $2 of them: on a
-- distributed install (src/store/citus.rs) webhook_next without a source
-- takes keys source by source, since Citus locks rows of one shard only.
-- Reads keys_open on every shard, locks nothing.
SELECT k.source
  FROM webhook_dedup.keys AS k
 WHERE k.state OPERATOR(pg_catalog.<>) 'completed' AND k.due_at OPERATOR(pg_catalog.<=) $1
 GROUP BY k.source
 ORDER BY pg_catalog.min(k.due_at)
 LIMIT $2
