-- The archived first delivery of a key (what it was processed with), for
-- webhook_next when webhook_dedup.payloads has none (a claimed key
-- redriven). The key's first_seen_at is its arrival time, so one day's
-- partition is searched. $1 source, $2 idem_key, $3 first_seen_at.
SELECT a.payload, a.headers
  FROM webhook_dedup.archive AS a
 WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.=) $3
   AND a.idem_key OPERATOR(pg_catalog.=) $2 AND NOT a.conflict
 LIMIT 1
