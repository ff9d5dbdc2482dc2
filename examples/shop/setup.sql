-- The business side of the example receivers (examples/fastapi, express,
-- sinatra): the tables their side effects write, and the login role they
-- run as. Run once as a superuser in the receivers' database, after
-- CREATE EXTENSION webhook_dedup:
--     psql -X -v ON_ERROR_STOP=1 -f examples/shop/setup.sql
-- Idempotent: running it again changes nothing.
--
-- The role may call the receiver functions (webhook_dedup_receiver: receive,
-- claim, complete, checkpoint, fail, enqueue, next, the outbox's put, next,
-- ack and fail, ...) and write these
-- tables, and nothing else: it has no privilege on any table of
-- webhook_dedup (docs/operations.md, "Privileges"). Keys are stored in the
-- database by an operator (webhook_dedup.add_secret), so the receivers hold
-- no secret.

DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) 'shop_receiver') THEN
    CREATE ROLE shop_receiver LOGIN;
  END IF;
END
$$;
GRANT webhook_dedup_receiver TO shop_receiver;

CREATE SCHEMA IF NOT EXISTS shop;
GRANT USAGE ON SCHEMA shop TO shop_receiver;

-- Step 1 of every job is a notification (think: an e-mail to the customer):
-- a call to another service, which cannot join the job's transaction. What
-- the job commits is its intent, in the extension's transactional outbox
-- (webhook_outbox_put, with the checkpoint), and each example's sender
-- delivers it (docs/outbox.md): no table here.

-- Step 2: the side effect, committed with webhook_complete. Deliberately
-- NOT unique on the key: exactly-once comes from the claim protocol (the
-- completion commits in the same transaction), not from a constraint.
CREATE TABLE IF NOT EXISTS shop.side_effects (
    id          bigserial PRIMARY KEY,
    source      text NOT NULL,
    idem_key    text NOT NULL,
    event_type  text,
    attempt     integer NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The state each event is about (a Stripe payment intent, a Standard
-- Webhooks object): the latest event applied to it. Providers deliver out of
-- order, so an event older than the stored one must not overwrite it: the
-- extension's trigger webhook_monotonic_guard skips such an update (zero
-- rows), also from INSERT ... ON CONFLICT DO UPDATE (docs/ordering.md).
CREATE TABLE IF NOT EXISTS shop.subjects (
    source            text NOT NULL,
    subject           text NOT NULL,
    last_event_type   text,
    source_updated_at timestamptz,
    PRIMARY KEY (source, subject)
);
CREATE OR REPLACE TRIGGER subjects_monotonic
    BEFORE INSERT OR UPDATE ON shop.subjects
    FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('source_updated_at');

GRANT SELECT, INSERT ON shop.side_effects TO shop_receiver;
GRANT SELECT, INSERT, UPDATE ON shop.subjects TO shop_receiver;
GRANT USAGE ON SEQUENCE shop.side_effects_id_seq TO shop_receiver;
