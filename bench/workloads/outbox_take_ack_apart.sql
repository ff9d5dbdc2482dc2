-- A sender's take and ack of one intent as senders run it (docs/outbox.md):
-- the lease commits before the call and the ack after it, so no
-- transaction stays open during the call. Two commits.
SELECT id, lease_token FROM webhook_dedup.webhook_outbox_next('bench-t', lease => '1 minute') \gset
SELECT webhook_dedup.webhook_outbox_ack(:id, :lease_token, '{"sent": true}');
