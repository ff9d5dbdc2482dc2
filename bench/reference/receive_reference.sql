-- A hand-written receive with the guarantees webhook_receive gives a
-- GitHub delivery, for the throughput target of webhook_receive: the
-- signature checked with pgcrypto (pgcrypto_github.sql), a replay guard
-- (the SHA-256 of the signed body stored once with the key it first came
-- under, INSERT ... ON CONFLICT DO NOTHING: a body re-sent under another
-- delivery id is recognised), and the PL/pgSQL claim of plpgsql_claim.sql
-- (a lease, a fencing token, a payload-hash conflict, stored results), in
-- one statement (workloads/reference_receive.sql). Loaded after
-- plpgsql_claim.sql and pgcrypto_github.sql. Lighter than
-- webhook_receive still: no constant-time comparison, no secret rotation,
-- no answer for a replay from its owner key, no bounded wait, no metrics.
CREATE TABLE bench.replay_guards (
    source      text  NOT NULL,
    body_sha256 bytea NOT NULL,
    idem_key    text  NOT NULL,
    PRIMARY KEY (source, body_sha256)
);
