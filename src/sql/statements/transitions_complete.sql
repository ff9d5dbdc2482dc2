-- webhook_complete: the key becomes completed if claim_token holds its
-- lease (fencing: a stale token matches nothing). The token is cleared: it
-- fences nothing any more, and a completed key is kept for the whole
-- retention, so every byte of it counts. Under READ COMMITTED a
-- concurrent reclaim is waited for and the condition re-checked on the
-- newest row. $1 source, $2 idem_key, $3 now, $4 claim_token, $5 result,
-- $6 expires_at (now plus the source's retention).
-- Returns the key's event_type when it was completed; no row otherwise.
UPDATE webhook_dedup.keys
   SET state = 'completed', result = $5, completed_at = $3, last_seen_at = $3,
       lease_expires_at = NULL, due_at = NULL, expires_at = $6, claim_token = NULL
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
   AND state OPERATOR(pg_catalog.=) 'processing' AND claim_token OPERATOR(pg_catalog.=) $4
RETURNING event_type
