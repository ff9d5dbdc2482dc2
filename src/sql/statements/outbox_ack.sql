-- webhook_outbox_ack: the intent is delivered if lease_token holds its
-- lease (fencing in the condition, as webhook_complete; a stale token
-- matches nothing). Under READ COMMITTED a concurrent take is waited for
-- and the condition re-checked on the newest row.
-- $1 id, $2 lease_token, $3 response, $4 now. Returns the intent's source.
UPDATE webhook_dedup.outbox
   SET state = 'completed', response = $3, delivered_at = $4, updated_at = $4,
       lease_token = NULL, lease_expires_at = NULL, due_at = NULL, next_attempt_at = NULL
 WHERE id OPERATOR(pg_catalog.=) $1
   AND state OPERATOR(pg_catalog.=) 'processing' AND lease_token OPERATOR(pg_catalog.=) $2
RETURNING source
