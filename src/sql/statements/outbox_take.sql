-- The work webhook_outbox_next(target => NULL) takes: due intents of every
-- target (pending, due retries, leases that lapsed: a leased intent is due
-- at its lease's expiry), oldest due first, each locked for the caller;
-- intents another sender holds right now are skipped, never waited for.
-- Sorts the due intents (outbox_open leads with the target: senders that
-- name theirs read it in order).
-- $1 now, $2 how many. Returns the intent row (store::outbox::IntentRow).
SELECT o.id, o.source, o.idem_key, o.operation, o.target, o.request, o.downstream_key, o.downstream_idempotent,
       o.state, o.attempt, o.lease_token, o.lease_expires_at, o.next_attempt_at, o.due_at
  FROM webhook_dedup.outbox AS o
 WHERE o.due_at OPERATOR(pg_catalog.<=) $1
 ORDER BY o.due_at
 LIMIT $2
   FOR NO KEY UPDATE SKIP LOCKED
