-- Completed keys in the default partition past their source's retention
-- (rows land there only when no partition covered their time; they are
-- deleted one by one, since the default partition is never dropped).
-- $1 now, $2 webhook_dedup.retention, $3 how many.
SELECT k.source, k.idem_key
  FROM webhook_dedup.keys_default AS k
 WHERE k.state OPERATOR(pg_catalog.=) 'completed'
   AND k.last_seen_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) COALESCE(
         (SELECT s.retention FROM webhook_dedup.sources AS s
           WHERE s.source OPERATOR(pg_catalog.=) k.source), $2))
 ORDER BY k.source COLLATE "C", k.idem_key COLLATE "C"
 LIMIT $3
