-- The one row of a key, across every partition. Run on the latest snapshot
-- under the key's lock (src/api/claim.rs). $1 source, $2 idem_key.
SELECT state, attempt, lease_expires_at, next_attempt_at, fingerprint, partition_at,
        claim_token, result, last_step, first_seen_at, event_type
   FROM webhook_dedup.keys
  WHERE source OPERATOR(pg_catalog.=) $1 AND idem_key OPERATOR(pg_catalog.=) $2
