-- A first claim: a new key, leased to the caller, attempt 1.
-- $1 source, $2 idem_key, $3 now, $4 claim_token, $5 lease_expires_at,
-- $6 fingerprint, $7 event_type.
INSERT INTO webhook_dedup.keys
    (source, idem_key, partition_at, state, attempt, claim_token, lease_expires_at, due_at,
     fingerprint, event_type, first_seen_at, last_seen_at, leased_at)
  VALUES ($1, $2, $3, 'processing', 1, $4, $5, $5, $6, $7, $3, $3, $3)
