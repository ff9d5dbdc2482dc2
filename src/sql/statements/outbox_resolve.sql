-- webhook_outbox_resolve by an operator (the caller holds the intent
-- locked). $1 id, $2 now, $3 new state, $4 response (kept when NULL),
-- $5 due_at (now for failed and pending, else NULL: completed leaves
-- outbox_open, dead_lettered is never due, due_at infinity), $6 attempt
-- (crate::outbox::attempt_after_resolve: 0 when sent again).
UPDATE webhook_dedup.outbox
   SET state = $3, response = COALESCE($4, response),
       due_at = CASE WHEN $3 OPERATOR(pg_catalog.=) 'completed' THEN NULL
                     ELSE COALESCE($5, 'infinity'::pg_catalog.timestamptz) END,
       next_attempt_at = CASE WHEN $3 OPERATOR(pg_catalog.=) 'failed' THEN $5 END,
       lease_expires_at = NULL,
       attempt = $6,
       lease_token = CASE WHEN $3 OPERATOR(pg_catalog.=) 'completed' THEN NULL ELSE lease_token END,
       delivered_at = CASE WHEN $3 OPERATOR(pg_catalog.=) 'completed' THEN $2 END,
       updated_at = $2
 WHERE id OPERATOR(pg_catalog.=) $1
