-- A delivery to claim (src/store/claim.rs): a new key is inserted, leased
-- to the caller with attempt 1; a known key is locked and its delivery
-- counted (deliveries, last_seen_at; it adopts the fingerprint if it has
-- none) and returned for crates/webhook-dedup-core/src/claim.rs to decide what the delivery means.
-- keys_pkey arbitrates: a concurrent first delivery of the same key waits
-- for this transaction, then finds the key. One statement, one round trip
-- in the executor, for the first delivery and for most duplicates.
-- $1 source, $2 idem_key, $3 now, $4 claim_token, $5 lease_expires_at,
-- $6 fingerprint, $7 event_type.
-- Returns inserted (deliveries is 1 only on an insert: a known key's is
-- counted up here) and the key row (store::KeyRow).
INSERT INTO webhook_dedup.keys AS k
    (source, idem_key, state, attempt, claim_token, lease_expires_at, due_at, fingerprint, event_type,
     first_seen_at, last_seen_at, leased_at)
  VALUES ($1, $2, 'processing', 1, $4, $5, $5, $6, $7, $3, $3, $3)
  ON CONFLICT (idem_key, source) DO UPDATE
    SET deliveries = k.deliveries OPERATOR(pg_catalog.+) 1,
        last_seen_at = EXCLUDED.last_seen_at,
        fingerprint = COALESCE(k.fingerprint, EXCLUDED.fingerprint)
  RETURNING k.deliveries OPERATOR(pg_catalog.=) 1 AS inserted,
            k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at, k.next_attempt_at,
            k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
