-- webhook_dedup.redact of one key (src/api/archive.rs): its stored result
-- and last error erased, who and when recorded, the key kept (a tombstone:
-- its state and fingerprint still answer duplicates and conflicts); its
-- payload for the workers (webhook_dedup.payloads) and every archived
-- delivery of it deleted. A key that exists is found through its times
-- (the first delivery at its first_seen_at, each conflicting one at its
-- conflict_log.seen_at: index archive_source, one day's partition each);
-- one that is gone (past retention: its archived deliveries may outlive it
-- until their day's partition is dropped) through a scan of the source's
-- archived deliveries (index archive_source).
-- $1 source, $2 idem_key, $3 now, $4 the session user.
-- Returns keys (0 or 1) and deliveries (payloads and archived rows erased).
WITH red AS (
  UPDATE webhook_dedup.keys AS k
     SET result = NULL, last_error = NULL, redacted_at = $3, redacted_by = $4
   WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1
  RETURNING k.first_seen_at
), arrivals AS (
  SELECT red.first_seen_at AS at FROM red
  UNION
  SELECT c.seen_at FROM webhook_dedup.conflict_log AS c
   WHERE c.idem_key OPERATOR(pg_catalog.=) $2 AND c.source OPERATOR(pg_catalog.=) $1
     AND EXISTS (SELECT FROM red)
), pay AS (
  DELETE FROM webhook_dedup.payloads AS p
   WHERE p.idem_key OPERATOR(pg_catalog.=) $2 AND p.source OPERATOR(pg_catalog.=) $1
  RETURNING 1
), arc AS (
  DELETE FROM webhook_dedup.archive AS a
   USING arrivals
   WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.=) arrivals.at
     AND a.idem_key OPERATOR(pg_catalog.=) $2
  RETURNING 1
), gone AS (
  DELETE FROM webhook_dedup.archive AS a
   WHERE NOT EXISTS (SELECT FROM red)
     AND a.source OPERATOR(pg_catalog.=) $1 AND a.idem_key OPERATOR(pg_catalog.=) $2
  RETURNING 1
)
SELECT (SELECT pg_catalog.count(*) FROM red) AS keys,
       (SELECT pg_catalog.count(*) FROM pay) OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM arc)
         OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM gone) AS deliveries
