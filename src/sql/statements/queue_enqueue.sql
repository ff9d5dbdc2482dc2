-- webhook_enqueue (src/store/queue.rs): a new key is stored pending, due
-- now, with its payload in webhook_dedup.payloads; a known key is locked
-- and its delivery counted as by claim_upsert.sql, and returned for
-- crates/webhook-dedup-core/src/claim.rs to decide (duplicate or conflict). A payload left behind by
-- a key deleted by hand is replaced.
-- $1 source, $2 idem_key, $3 now, $4 payload, $5 fingerprint,
-- $6 event_type, $7 headers, $8 reconciled_at (a reconciliation job's
-- enqueue, webhook_dedup.reconcile; NULL for a delivery).
-- Returns inserted (as claim_upsert.sql) and the key row (store::KeyRow).
WITH upserted AS (
  INSERT INTO webhook_dedup.keys AS k
      (source, idem_key, state, attempt, due_at, fingerprint, event_type, first_seen_at, last_seen_at, reconciled_at)
    VALUES ($1, $2, 'pending', 0, $3, $5, $6, $3, $3, $8)
    ON CONFLICT (idem_key, source) DO UPDATE
      SET deliveries = k.deliveries OPERATOR(pg_catalog.+) 1,
          last_seen_at = EXCLUDED.last_seen_at,
          fingerprint = COALESCE(k.fingerprint, EXCLUDED.fingerprint)
    RETURNING k.deliveries OPERATOR(pg_catalog.=) 1 AS inserted,
              k.source, k.idem_key, k.state, k.attempt, k.claim_token, k.lease_expires_at, k.next_attempt_at,
              k.fingerprint, k.event_type, k.result, k.last_step, k.first_seen_at, k.due_at
), stored AS (
  INSERT INTO webhook_dedup.payloads AS p (source, idem_key, payload, headers)
    SELECT u.source, u.idem_key, $4, $7 FROM upserted AS u WHERE u.inserted
    ON CONFLICT (idem_key, source) DO UPDATE SET payload = EXCLUDED.payload, headers = EXCLUDED.headers
)
SELECT * FROM upserted
