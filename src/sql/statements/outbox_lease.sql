-- An intent the caller holds locked is leased to a sender
-- (webhook_outbox_next): due again when the lease expires (as a key's).
-- $1 id, $2 attempt, $3 lease_token, $4 lease_expires_at, $5 now.
UPDATE webhook_dedup.outbox
   SET state = 'processing', attempt = $2, lease_token = $3, lease_expires_at = $4, due_at = $4,
       next_attempt_at = NULL, leased_at = $5, updated_at = $5
 WHERE id OPERATOR(pg_catalog.=) $1
