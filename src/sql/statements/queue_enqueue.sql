-- webhook_enqueue of a new key: stored pending, with its payload, due now.
-- $1 source, $2 idem_key, $3 now, $4 payload, $5 fingerprint,
-- $6 event_type, $7 headers.
INSERT INTO webhook_dedup.keys
    (source, idem_key, partition_at, state, attempt, due_at, payload, fingerprint, event_type,
     headers, first_seen_at, last_seen_at)
  VALUES ($1, $2, $3, 'pending', 0, $3, $4, $5, $6, $7, $3, $3)
