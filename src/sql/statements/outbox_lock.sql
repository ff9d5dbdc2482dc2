-- An intent's row, locked for this transaction (waits for a concurrent
-- writer; under REPEATABLE READ 40001 if it changed after the snapshot):
-- for the calls that check a lease token or a state and then write.
-- $1 id. Returns the intent row (store::outbox::IntentRow).
SELECT o.id, o.source, o.idem_key, o.operation, o.target, o.request, o.downstream_key, o.downstream_idempotent,
       o.state, o.attempt, o.lease_token, o.lease_expires_at, o.next_attempt_at, o.due_at
  FROM webhook_dedup.outbox AS o
 WHERE o.id OPERATOR(pg_catalog.=) $1
   FOR NO KEY UPDATE
