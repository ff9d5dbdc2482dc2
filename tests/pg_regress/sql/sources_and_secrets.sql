-- sources_and_secrets.sql: per-source settings (the table
-- webhook_dedup.sources, its intake check webhook_dedup.source_intake_valid
-- and its trigger function webhook_dedup.sources_changed) and the
-- verification keys kept in the database (add_secret, retire_secret,
-- list_secrets, dump_secrets), which webhook_receive uses when it is passed
-- no secrets. Key ids are kept in psql variables (they come from a
-- sequence); validity times are fixed.
--
-- SQLSTATEs in this file:
--   22004  a NULL source, secret or key id
--   22023  an empty or whitespace-padded secret; a secret that is no key of
--          the source's scheme; a source of 0 or over 255 characters;
--          infinite times; not_after not after not_before; a stored key
--          that cannot be a key of the delivery's scheme; an invalid
--          intake setting (source_intake_valid, and the table's check)
--   P0002  retire_secret of a key the source does not have
--   55000  webhook_receive without secrets, when the source has no key for
--          the scheme valid at the delivery's time
--   39P01  the trigger function sources_changed called directly
--   23514  a setting outside its range (the table's own CHECK constraints)
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. A source's keys. add_secret checks the secret against the source's
--    scheme (its provider in webhook_dedup.sources, else its name when
--    that is a scheme) and returns the key's id; list_secrets shows the
--    keys, never their values: a fingerprint (sha256: and 8 hex digits),
--    the validity, and the scheme each was accepted for.
--
INSERT INTO webhook_dedup.sources (source, provider, note) VALUES ('keys_gh', 'github', 'the GitHub App');
SELECT webhook_dedup.add_secret('keys_gh', 'gh-old-secret', not_before => '2020-01-01', note => 'first') AS id \gset old_
SELECT webhook_dedup.add_secret('keys_gh', 'gh-new-secret', not_before => '2024-01-01', note => 'rotated') AS id \gset new_
SELECT :new_id > :old_id AS ids_grow;
SELECT source, not_before, not_after, valid_now, fingerprint, note, scheme
  FROM webhook_dedup.list_secrets('keys_gh') ORDER BY id;
-- Rotation: the old key is retired once the provider signs with the new
-- one only; deliveries at or after not_after no longer verify with it.
SELECT webhook_dedup.retire_secret('keys_gh', :old_id, not_after => '2024-02-01') AS retired_at;
SELECT source, not_before, not_after, valid_now, note FROM webhook_dedup.list_secrets('keys_gh') ORDER BY id;

--
-- 2. webhook_receive without secrets verifies with the source's keys
--    valid at the delivery's time (at); secret_index is the key's id.
--
\set body '{"action":"opened","issue":{"number":7}}'
SELECT webhook_dedup.webhook_sign('github', convert_to(:'body', 'UTF8'), 'gh-old-secret')
       || '{"X-GitHub-Delivery": "k-1", "X-GitHub-Event": "issues"}' AS old_signed \gset
\set body2 '{"action":"closed","issue":{"number":7}}'
SELECT webhook_dedup.webhook_sign('github', convert_to(:'body2', 'UTF8'), 'gh-new-secret')
       || '{"X-GitHub-Delivery": "k-2", "X-GitHub-Event": "issues"}' AS new_signed \gset
-- signed with the old key, in January 2024: both keys are valid then
SELECT verified, reject_reason, secret_index = :old_id AS by_old_key, outcome, idem_key
  FROM webhook_dedup.webhook_receive('github', convert_to(:'body', 'UTF8'), :'old_signed'::jsonb,
                                     source => 'keys_gh', mode => 'enqueue', at => '2024-01-15 00:00:00+00');
-- ... and after the old key's retirement: no longer
SELECT verified, reject_reason, secret_index, outcome
  FROM webhook_dedup.webhook_receive('github', convert_to(:'body', 'UTF8'), :'old_signed'::jsonb,
                                     source => 'keys_gh', mode => 'enqueue', at => '2024-03-01 00:00:00+00');
-- signed with the new key, after the rotation
SELECT verified, secret_index = :new_id AS by_new_key, outcome, idem_key
  FROM webhook_dedup.webhook_receive('github', convert_to(:'body2', 'UTF8'), :'new_signed'::jsonb,
                                     source => 'keys_gh', mode => 'enqueue', at => '2024-03-01 00:00:00+00');
-- 55000: before any key was valid (2019) there is none to verify with.
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'body2', 'UTF8'), :'new_signed'::jsonb,
                                            source => 'keys_gh', mode => 'enqueue', at => '2019-06-01 00:00:00+00');

--
-- 3. A key verifies only deliveries of the scheme it was accepted for. A
--    source whose provider changes keeps its keys' scheme: after keys_gh
--    becomes a Stripe source, its GitHub keys verify no Stripe delivery
--    (55000, with a hint naming the scheme they were added for).
--
UPDATE webhook_dedup.sources SET provider = 'stripe' WHERE source = 'keys_gh';
SELECT * FROM webhook_dedup.webhook_receive('stripe', '{"id":"evt_1"}'::bytea,
         webhook_dedup.webhook_sign('stripe', '{"id":"evt_1"}'::bytea, 'gh-new-secret', at => '2024-03-01 00:00:00+00'),
         source => 'keys_gh', at => '2024-03-01 00:00:00+00');
SELECT scheme FROM webhook_dedup.list_secrets('keys_gh') ORDER BY id;
-- A source whose name and provider are no scheme keeps keys of no scheme
-- (NULL), checked against the scheme of each delivery: a plain string is
-- no Standard Webhooks secret, 22023 (the key is named by its id, never
-- echoed).
SELECT webhook_dedup.add_secret('keys_any', 'plain-secret', not_before => '2020-01-01') AS id \gset any_
SELECT scheme FROM webhook_dedup.list_secrets('keys_any');
SELECT * FROM webhook_dedup.webhook_receive('standard', '{}'::bytea,
         '{"webhook-id": "m1", "webhook-timestamp": "1700000000", "webhook-signature": "v1,AAAA"}',
         source => 'keys_any', at => to_timestamp(1700000000));

--
-- 4. What add_secret checks for the source's scheme: a Standard Webhooks
--    secret must be whsec_ and canonical base64, a Discord key a public
--    key (22023; the secret is never echoed).
--
SELECT webhook_dedup.add_secret('standard', 'whsec_not base64') AS id;
SELECT webhook_dedup.add_secret('discord', 'not-a-public-key') AS id;
SELECT webhook_dedup.add_secret('standard', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', not_before => '2020-01-01') > 0 AS added;
SELECT scheme, fingerprint FROM webhook_dedup.list_secrets('standard');

--
-- 5. Errors of the key functions.
--
-- 22004: a NULL source, secret or key id
SELECT webhook_dedup.add_secret(NULL, 's');
SELECT webhook_dedup.add_secret('keys_gh', NULL);
SELECT webhook_dedup.retire_secret('keys_gh', NULL);
-- 22023: an empty or whitespace-padded secret, a source of 0 or over 255
-- characters, infinite times, not_after not after not_before
SELECT webhook_dedup.add_secret('keys_gh', '');
SELECT webhook_dedup.add_secret('keys_gh', ' padded');
SELECT webhook_dedup.add_secret('', 's');
SELECT webhook_dedup.add_secret(repeat('s', 256), 's');
SELECT webhook_dedup.add_secret('keys_gh', 's', not_before => '-infinity');
SELECT webhook_dedup.add_secret('keys_gh', 's', not_after => 'infinity');
SELECT webhook_dedup.add_secret('keys_gh', 's', not_before => '2024-01-01', not_after => '2024-01-01');
SELECT webhook_dedup.retire_secret('keys_gh', :new_id, not_after => '2023-01-01');
-- P0002: a key the source does not have (another source's key included)
SELECT webhook_dedup.retire_secret('keys_gh', -1);
SELECT webhook_dedup.retire_secret('keys_gh', :any_id);
-- none of those changed anything
SELECT count(*) AS keys FROM webhook_dedup.list_secrets('keys_gh');

--
-- 6. pg_dump leaves the keys out unless an operator opts in.
--
SELECT webhook_dedup.dump_secrets(true) AS dumped;
SELECT webhook_dedup.dump_secrets(false) AS dumped;
SELECT webhook_dedup.dump_secrets(NULL);

--
-- 7. The sources table: every setting is checked when the row is written.
--    Intake settings by webhook_dedup.source_intake_valid (22023 naming the
--    column); the others by the table's CHECK constraints (23514).
--
SELECT webhook_dedup.source_intake_valid('s', 'header:X-Acme-Delivery', '/kind', '/at', 'unix_milliseconds',
                                         '{/kind,/data}', '{shipment.*}') AS valid;
SELECT webhook_dedup.source_intake_valid('s', 'X-Acme-Delivery', NULL, NULL, NULL, NULL, NULL);
SELECT webhook_dedup.source_intake_valid('s', NULL, NULL, '/at', NULL, NULL, NULL);
SELECT webhook_dedup.source_intake_valid('s', NULL, NULL, '/at', 'unix_weeks', NULL, NULL);
SELECT webhook_dedup.source_intake_valid('s', NULL, NULL, NULL, NULL, '{no-slash}', NULL);
SELECT webhook_dedup.source_intake_valid('s', NULL, NULL, NULL, NULL, NULL, '{*.paid}');
UPDATE webhook_dedup.sources SET event_type_from = 'header:' WHERE source = 'keys_gh';
INSERT INTO webhook_dedup.sources (source, lease) VALUES ('keys_bad', '0');
INSERT INTO webhook_dedup.sources (source, retention) VALUES ('keys_bad', '1 month');
INSERT INTO webhook_dedup.sources (source, tolerance) VALUES ('keys_bad', '-1 second');
INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('keys_bad', 0);
INSERT INTO webhook_dedup.sources (source, keep_payload, retention, payload_retention)
VALUES ('keys_bad', true, '1 day', '2 days');
-- 39P01: the trigger function that keeps every backend's cache of these
-- tables current cannot be called directly.
SELECT webhook_dedup.sources_changed();
