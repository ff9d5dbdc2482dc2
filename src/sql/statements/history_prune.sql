-- Delete up to $3 rows of each history table past retention: watermarks
-- (by updated_at), replay guards whose key is gone, signed tokens whose
-- signature's window has closed, and conflicts (seen_at)
-- and hourly claim counts (bucket) by
-- their source's retention, per-minute claim counts after two hours (the
-- maintenance runs: maintenance_runs_prune.sql).
-- Each is bounded and uses its time index; returns how many went.
-- $1 now, $2 webhook_dedup.retention, $3 how many per table,
-- $4 the shortest retention of any source (an index bound for the scans).
WITH cutoff AS (
  SELECT $1 OPERATOR(pg_catalog.-) $4 AS earliest
), watermarks AS (
  DELETE FROM webhook_dedup.watermarks AS w
   WHERE w.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
     SELECT x.ctid FROM webhook_dedup.watermarks AS x, cutoff
      WHERE x.updated_at OPERATOR(pg_catalog.<) cutoff.earliest
        AND x.updated_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) COALESCE(
              (SELECT s.retention FROM webhook_dedup.sources AS s
                WHERE s.source OPERATOR(pg_catalog.=) x.source), $2))
      LIMIT $3 FOR UPDATE OF x SKIP LOCKED))
  RETURNING 1
), guards AS (
  DELETE FROM webhook_dedup.replay_guards AS g
   WHERE g.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
     SELECT x.ctid FROM webhook_dedup.replay_guards AS x, cutoff
      WHERE x.seen_at OPERATOR(pg_catalog.<) cutoff.earliest
        AND x.seen_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) COALESCE(
              (SELECT s.retention FROM webhook_dedup.sources AS s
                WHERE s.source OPERATOR(pg_catalog.=) x.source), $2))
        -- kept while its key lives (a dead letter, an unknown outcome, a
        -- key still active): a replay of its body is still answered
        AND NOT EXISTS (SELECT FROM webhook_dedup.keys AS k
                         WHERE k.idem_key OPERATOR(pg_catalog.=) x.idem_key
                           AND k.source OPERATOR(pg_catalog.=) x.source)
      LIMIT $3 FOR UPDATE OF x SKIP LOCKED))
  RETURNING 1
), tokens AS (
  DELETE FROM webhook_dedup.signature_tokens AS t
   WHERE t.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
     SELECT x.ctid FROM webhook_dedup.signature_tokens AS x, cutoff
      WHERE x.signed_at OPERATOR(pg_catalog.<) cutoff.earliest
        AND x.signed_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) COALESCE(
              (SELECT s.retention FROM webhook_dedup.sources AS s
                WHERE s.source OPERATOR(pg_catalog.=) x.source), $2))
        -- kept while its signature still verifies
        AND x.window_until OPERATOR(pg_catalog.<) $1
      LIMIT $3 FOR UPDATE OF x SKIP LOCKED))
  RETURNING 1
), conflicts AS (
  DELETE FROM webhook_dedup.conflict_log AS c
   WHERE c.id OPERATOR(pg_catalog.=) ANY (ARRAY(
     SELECT x.id FROM webhook_dedup.conflict_log AS x, cutoff
      WHERE x.seen_at OPERATOR(pg_catalog.<) cutoff.earliest
        AND x.seen_at OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) COALESCE(
              (SELECT s.retention FROM webhook_dedup.sources AS s
                WHERE s.source OPERATOR(pg_catalog.=) x.source), $2))
      LIMIT $3))
  RETURNING 1
), counts AS (
  DELETE FROM webhook_dedup.claim_counts AS c
   WHERE c.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
     SELECT x.ctid FROM webhook_dedup.claim_counts AS x, cutoff
      WHERE (x.bucket OPERATOR(pg_catalog.<) cutoff.earliest
             AND x.bucket OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) COALESCE(
                   (SELECT s.retention FROM webhook_dedup.sources AS s
                     WHERE s.source OPERATOR(pg_catalog.=) x.source), $2)))
         OR (x.bucket OPERATOR(pg_catalog.<) ($1 OPERATOR(pg_catalog.-) '2 hours'::interval)
             AND x.bucket_width OPERATOR(pg_catalog.=) '1 minute'::interval)
      LIMIT $3 FOR UPDATE OF x SKIP LOCKED))
  RETURNING 1
)
SELECT (SELECT pg_catalog.count(*) FROM watermarks) AS watermarks,
       (SELECT pg_catalog.count(*) FROM conflicts) AS conflicts,
       (SELECT pg_catalog.count(*) FROM counts) AS counts,
       (SELECT pg_catalog.count(*) FROM guards) AS guards,
       (SELECT pg_catalog.count(*) FROM tokens) AS tokens
