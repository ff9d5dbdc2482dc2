-- outbox_take.sql for one target, in outbox_open's order.
-- $1 now, $2 target, $3 how many. Returns the intent row
-- (store::outbox::IntentRow).
SELECT o.id, o.source, o.idem_key, o.operation, o.target, o.request, o.downstream_key, o.downstream_idempotent,
       o.state, o.attempt, o.lease_token, o.lease_expires_at, o.next_attempt_at, o.due_at
  FROM webhook_dedup.outbox AS o
 WHERE o.target OPERATOR(pg_catalog.=) $2 AND o.due_at OPERATOR(pg_catalog.<=) $1
 ORDER BY o.due_at
 LIMIT $3
   FOR NO KEY UPDATE SKIP LOCKED
