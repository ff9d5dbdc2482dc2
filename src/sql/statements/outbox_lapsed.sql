-- Intents whose sender's lease lapsed, oldest first, each locked for the
-- sweep (src/maintenance/outbox.rs); intents a sender or a take holds
-- right now are skipped. A leased intent is due at its lease's expiry
-- (outbox_open).
-- $1 now, $2 how many. Returns the intent row (store::outbox::IntentRow).
SELECT o.id, o.source, o.idem_key, o.operation, o.target, o.request, o.downstream_key, o.downstream_idempotent,
       o.state, o.attempt, o.lease_token, o.lease_expires_at, o.next_attempt_at, o.due_at
  FROM webhook_dedup.outbox AS o
 WHERE o.due_at OPERATOR(pg_catalog.<=) $1 AND o.state OPERATOR(pg_catalog.=) 'processing'
   AND o.lease_expires_at OPERATOR(pg_catalog.<=) $1
 ORDER BY o.due_at
 LIMIT $2
   FOR NO KEY UPDATE SKIP LOCKED
