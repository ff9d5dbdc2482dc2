-- The longest payload retention of the sources that keep payloads
-- (keep_payload), each cut to its key's retention (crates/webhook-dedup-core/src/archive.rs,
-- payload_retention_us): partitions past it are dropped whole. NULL when
-- no source keeps payloads. $1 webhook_dedup.retention.
SELECT pg_catalog.max(LEAST(COALESCE(s.payload_retention, s.retention, $1), COALESCE(s.retention, $1))) AS longest
  FROM webhook_dedup.sources AS s
 WHERE s.keep_payload
