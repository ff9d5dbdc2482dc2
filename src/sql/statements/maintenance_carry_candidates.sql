-- The keys of one partition that must live on when it is dropped: every key
-- not completed, and completed keys still within their source's retention
-- after their last activity. In key-lock order. Run while the partition is
-- locked against writes (SHARE), so the answer stays true.
-- $1 lower bound, $2 upper bound, $3 now, $4 webhook_dedup.retention,
-- $5 how many.
SELECT k.source, k.idem_key
  FROM webhook_dedup.keys AS k
 WHERE k.partition_at OPERATOR(pg_catalog.>=) $1 AND k.partition_at OPERATOR(pg_catalog.<) $2
   AND (k.state OPERATOR(pg_catalog.<>) 'completed'
        OR k.last_seen_at OPERATOR(pg_catalog.>=) ($3 OPERATOR(pg_catalog.-) COALESCE(
             (SELECT s.retention FROM webhook_dedup.sources AS s
               WHERE s.source OPERATOR(pg_catalog.=) k.source), $4)))
 ORDER BY k.source COLLATE "C", k.idem_key COLLATE "C"
 LIMIT $5
