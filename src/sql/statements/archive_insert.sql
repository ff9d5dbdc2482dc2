-- Archive one delivery (src/store/archive.rs): a key's first delivery or a
-- conflicting one, for a source with keep_payload. Routed to the day's
-- partition of webhook_dedup.archive (archive_default when there is none).
-- $1 received_at, $2 source, $3 idem_key, $4 event_id, $5 event_type,
-- $6 conflict, $7 payload, $8 headers.
INSERT INTO webhook_dedup.archive (received_at, source, idem_key, event_id, event_type, conflict, payload, headers)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
