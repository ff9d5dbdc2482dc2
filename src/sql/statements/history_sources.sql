-- The sources with history rows old enough that they may be past
-- retention, at most $3 of them: on a distributed install history is
-- pruned source by source (src/store/history.rs, src/store/citus.rs).
-- Rows older than $1 (now minus the shortest retention of any source): the
-- watermarks, replay guards, signed tokens, conflicts and hourly claim
-- counts; per-minute
-- claim counts older than $2 (now minus two hours). A read without locks
-- (Citus runs it on every shard); each table's time index.
SELECT h.source FROM (
  SELECT w.source FROM webhook_dedup.watermarks AS w WHERE w.updated_at OPERATOR(pg_catalog.<) $1
  UNION
  SELECT g.source FROM webhook_dedup.replay_guards AS g WHERE g.seen_at OPERATOR(pg_catalog.<) $1
  UNION
  SELECT t.source FROM webhook_dedup.signature_tokens AS t WHERE t.signed_at OPERATOR(pg_catalog.<) $1
  UNION
  SELECT c.source FROM webhook_dedup.conflict_log AS c WHERE c.seen_at OPERATOR(pg_catalog.<) $1
  UNION
  SELECT n.source FROM webhook_dedup.claim_counts AS n
   WHERE n.bucket OPERATOR(pg_catalog.<) $1
      OR (n.bucket OPERATOR(pg_catalog.<) $2 AND n.bucket_width OPERATOR(pg_catalog.=) '1 minute'::interval)
) AS h
 LIMIT $3
