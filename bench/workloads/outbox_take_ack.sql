-- A sender's take and ack of one intent, in one transaction (as the
-- hand-written loop, user_outbox_take_update.sql, holds its row lock):
-- webhook_outbox_next leases the oldest due intent of the target, and
-- webhook_outbox_ack delivers it. bench.py keeps the queue from running dry.
BEGIN;
SELECT id, lease_token FROM webhook_dedup.webhook_outbox_next('bench-t', lease => '1 minute') \gset
SELECT webhook_dedup.webhook_outbox_ack(:id, :lease_token, '{"sent": true}');
COMMIT;
