-- The one row of a key, across every partition, with its source's settings:
-- always one row (all key columns NULL when the key is unknown). Run on the
-- latest snapshot under the key's lock (src/api/protocol.rs).
-- $1 source, $2 idem_key.
SELECT k.state, k.attempt, k.lease_expires_at, k.next_attempt_at, k.fingerprint, k.partition_at,
       k.claim_token, k.result, k.last_step, k.first_seen_at, k.event_type,
       s.lease, s.max_attempts, k.due_at
  FROM (SELECT) AS one
  LEFT JOIN webhook_dedup.keys AS k
         ON k.source OPERATOR(pg_catalog.=) $1 AND k.idem_key OPERATOR(pg_catalog.=) $2
  LEFT JOIN webhook_dedup.sources AS s
         ON s.source OPERATOR(pg_catalog.=) $1
