-- webhook_dedup.redact of a source's keys first seen before a time, as
-- redact_key.sql for each, and every delivery of the source archived
-- before that time (of keys gone too). A scan of the source's keys (the
-- primary key leads with idem_key); the archive by index archive_source,
-- the later conflicting deliveries of those keys at their conflict_log
-- seen_at.
-- $1 source, $2 before, $3 now, $4 the session user.
-- Returns keys and deliveries.
WITH red AS (
  UPDATE webhook_dedup.keys AS k
     SET result = NULL, last_error = NULL, redacted_at = $3, redacted_by = $4
   WHERE k.source OPERATOR(pg_catalog.=) $1 AND k.first_seen_at OPERATOR(pg_catalog.<) $2
  RETURNING k.idem_key, k.source
), pay AS (
  DELETE FROM webhook_dedup.payloads AS p
   USING red
   WHERE p.idem_key OPERATOR(pg_catalog.=) red.idem_key AND p.source OPERATOR(pg_catalog.=) red.source
  RETURNING 1
), arc AS (
  DELETE FROM webhook_dedup.archive AS a
   WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.<) $2
  RETURNING 1
), later AS (
  DELETE FROM webhook_dedup.archive AS a
   USING red, webhook_dedup.conflict_log AS c
   WHERE c.idem_key OPERATOR(pg_catalog.=) red.idem_key AND c.source OPERATOR(pg_catalog.=) red.source
     AND c.seen_at OPERATOR(pg_catalog.>=) $2
     AND a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.=) c.seen_at
     AND a.idem_key OPERATOR(pg_catalog.=) c.idem_key
  RETURNING 1
)
SELECT (SELECT pg_catalog.count(*) FROM red) AS keys,
       (SELECT pg_catalog.count(*) FROM pay) OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM arc)
         OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM later) AS deliveries
