-- Record a delivery whose payload differs from the key's fingerprint.
-- $1 source, $2 idem_key, $3 now, $4 stored fingerprint, $5 fingerprint,
-- $6 'claim' or 'enqueue'.
INSERT INTO webhook_dedup.conflict_log (source, idem_key, seen_at, stored_fingerprint, fingerprint, via)
  VALUES ($1, $2, $3, $4, $5, $6)
