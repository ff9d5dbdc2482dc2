-- webhook_dedup.redact of the keys of one account of a source: the keys
-- webhook_key / webhook_receive derived with that account (the third of
-- the five fields, source:environment:account:event_id:operation, escaped
-- as src/key.rs escapes it), as redact_key.sql for each. A scan of the
-- source's keys, and of its archived deliveries (those of keys gone
-- too: index archive_source). $1 source, $2 the account's escaped field, $3 now, $4 the
-- session user. Returns keys and deliveries.
WITH red AS (
  UPDATE webhook_dedup.keys AS k
     SET result = NULL, last_error = NULL, redacted_at = $3, redacted_by = $4
   WHERE k.source OPERATOR(pg_catalog.=) $1
     AND pg_catalog.split_part(k.idem_key, ':', 3) OPERATOR(pg_catalog.=) $2
     AND pg_catalog.split_part(k.idem_key, ':', 4) OPERATOR(pg_catalog.<>) ''
  RETURNING k.idem_key, k.source, k.first_seen_at
), pay AS (
  DELETE FROM webhook_dedup.payloads AS p
   USING red
   WHERE p.idem_key OPERATOR(pg_catalog.=) red.idem_key AND p.source OPERATOR(pg_catalog.=) red.source
  RETURNING 1
), arc AS (
  DELETE FROM webhook_dedup.archive AS a
   WHERE a.source OPERATOR(pg_catalog.=) $1
     AND pg_catalog.split_part(a.idem_key, ':', 3) OPERATOR(pg_catalog.=) $2
     AND pg_catalog.split_part(a.idem_key, ':', 4) OPERATOR(pg_catalog.<>) ''
  RETURNING 1
)
SELECT (SELECT pg_catalog.count(*) FROM red) AS keys,
       (SELECT pg_catalog.count(*) FROM pay) OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM arc) AS deliveries
