-- webhook_forget by an operator: the key and its payload go.
-- $1 source, $2 idem_key. Returns the key's event_type and first_seen_at
-- when it existed (its archived deliveries go next: archive_forget.sql).
WITH gone AS (
  DELETE FROM webhook_dedup.keys
   WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
  RETURNING event_type, first_seen_at
), payload AS (
  DELETE FROM webhook_dedup.payloads
   WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
)
SELECT event_type, first_seen_at FROM gone
