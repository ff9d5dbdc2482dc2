-- The outbox a receiver author writes by hand instead of webhook_outbox_put
-- and webhook_outbox_next (the pattern of Debezium's outbox table and of the
-- guides' sent_notifications table): one row per intended call, unique per
-- (event, operation), a partial index for the sender's queue, taken with
-- SELECT ... FOR UPDATE SKIP LOCKED and marked sent with an UPDATE. No lease,
-- no fencing by the key's claim, no downstream key, no retries, no dead
-- letters: what the outbox is compared against for cost (docs/outbox.md).
CREATE SCHEMA IF NOT EXISTS bench;

CREATE TABLE bench.user_outbox (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source      text        NOT NULL,
    idem_key    text        NOT NULL,
    operation   text        NOT NULL,
    target      text        NOT NULL,
    request     jsonb       NOT NULL,
    state       text        NOT NULL DEFAULT 'pending',
    response    jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz,
    UNIQUE (source, idem_key, operation)
);
CREATE INDEX user_outbox_pending ON bench.user_outbox (target, created_at) WHERE state = 'pending';

-- The claim tokens of keys held for the CPU loops (bench.py, scenario outbox).
CREATE TABLE bench.held (tag text, n integer, token uuid, PRIMARY KEY (tag, n));
