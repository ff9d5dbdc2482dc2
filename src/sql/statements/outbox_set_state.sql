-- An intent the caller holds locked moves to failed (due at $4),
-- dead_lettered or unknown_outcome ($4 NULL: never due, due_at infinity,
-- which keeps it in outbox_open for the views), with $5 as last_error: a
-- sender's fail or unknown, the sweep of a lapsed lease, a take that found
-- it out of attempts or parked it. $1 id, $2 now, $3 state,
-- $4 next_attempt_at, $5 error.
UPDATE webhook_dedup.outbox
   SET state = $3, next_attempt_at = $4, due_at = COALESCE($4, 'infinity'::pg_catalog.timestamptz), last_error = $5,
       lease_expires_at = NULL, updated_at = $2
 WHERE id OPERATOR(pg_catalog.=) $1
