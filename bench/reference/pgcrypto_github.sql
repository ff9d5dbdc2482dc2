-- What a user writes to verify a GitHub delivery in SQL without
-- webhook_dedup: pgcrypto's HMAC-SHA256 over the body compared with the
-- X-Hub-Signature-256 header ("sha256=" and lowercase hex, as
-- docs.github.com "Validating webhook deliveries" describes), and the
-- delivery id (X-GitHub-Delivery) stored with a plain insert, in one
-- statement. Not constant-time, no secret rotation: the cheapest honest
-- version.
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE SCHEMA IF NOT EXISTS bench;

CREATE TABLE bench.github_deliveries (
    delivery_id text        PRIMARY KEY,
    event       text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
