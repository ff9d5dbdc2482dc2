-- The SQL the guides write instead of webhook_dedup: one row per event id,
-- claimed with INSERT ... ON CONFLICT DO NOTHING RETURNING, marked done with
-- an UPDATE in the same transaction as the business writes. No lease, no
-- fencing, no payload check, no retention: what webhook_dedup is compared
-- against for cost. (Stripe's "Best practices for using webhooks": "log the
-- event IDs you've processed, and then not processing already-logged events";
-- Hookdeck and Svix publish the same table and statement.)
CREATE SCHEMA IF NOT EXISTS bench;

CREATE TABLE bench.processed_events (
    source      text        NOT NULL,
    event_id    text        NOT NULL,
    status      text        NOT NULL DEFAULT 'processing',
    result      jsonb,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, event_id)
);
