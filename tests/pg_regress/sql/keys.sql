-- keys.sql: the keys, which write nothing and need no role:
-- webhook_key (an event's idempotency key), webhook_body_key (the fallback
-- for events without an id) and webhook_operation_key (the downstream
-- idempotency key of one operation of an event), with the presets of
-- webhook_dedup.downstream_key_limits.
--
-- SQLSTATEs in this file:
--   22004  a NULL source, event id, payload, idem_key, operation or max_length
--   22023  an empty part; an operation key's part over 255 characters, a
--          max_length outside 32..255, an unknown downstream, a max_length
--          that contradicts the downstream's
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. webhook_key: source:event_id, or, when any optional part is given,
--    source:environment:account:event_id:operation with absent parts empty
--    (the example of docs/sql-reference.md is the second row).
--
SELECT webhook_dedup.webhook_key('stripe', 'evt_1') AS plain,
       webhook_dedup.webhook_key('stripe', 'evt_1', account => 'acct_9') AS with_account,
       webhook_dedup.webhook_key('stripe', 'evt_1', environment => 'live', account => 'acct_9',
                                 operation => 'refund') AS every_part;
-- Each part is escaped (% as %25, : as %3A), so no two part lists give one
-- key: these two would both read a:b:c unescaped.
SELECT webhook_dedup.webhook_key('a:b', 'c') AS colon_in_source,
       webhook_dedup.webhook_key('a', 'b:c') AS colon_in_id,
       webhook_dedup.webhook_key('a', '100%') AS percent;
-- Ids are case-sensitive and not normalised.
SELECT webhook_dedup.webhook_key('s', 'Evt_1') = webhook_dedup.webhook_key('s', 'evt_1') AS same_key;
-- At most 255 characters: a longer readable form keeps its first 189
-- characters and ends in %h and the SHA-256 of the whole form.
SELECT length(k) AS length, left(k, 20) AS starts, substr(k, 190, 2) AS marker,
       length(substr(k, 192)) AS hex_digits
  FROM webhook_dedup.webhook_key('s', repeat('x', 300)) AS k;
SELECT length(webhook_dedup.webhook_key('s', repeat('x', 253))) AS fits_exactly;

--
-- 2. webhook_body_key: %b and the SHA-256 of the raw body where the event
--    id goes, scoped the same way; never equal to a webhook_key.
--
SELECT webhook_dedup.webhook_body_key('slack', convert_to('token=xyz&team_id=T1', 'UTF8')) AS body_key;
SELECT webhook_dedup.webhook_body_key('slack', convert_to('token=xyz&team_id=T1', 'UTF8'), account => 'T1') AS scoped;
-- One byte more is another key (whitespace included).
SELECT webhook_dedup.webhook_body_key('s', '{"a":1}'::bytea) = webhook_dedup.webhook_body_key('s', '{"a": 1}'::bytea) AS same_key;

--
-- 3. webhook_operation_key: operation:source:idem_key, each part
--    percent-encoded (the README's example is the first column).
--
SELECT webhook_dedup.webhook_operation_key('stripe', webhook_dedup.webhook_key('stripe', 'evt_1'), 'refund') AS refund,
       webhook_dedup.webhook_operation_key('stripe', 'stripe:evt_1', 'email:receipt') AS email;
-- When it does not fit, as much of the operation as fits, '-' and 32 hex
-- digits of SHA-256 of the plain form: deterministic, and distinct per
-- (event, operation). With max_length 32 only the digest fits.
SELECT k, length(k) AS length
  FROM webhook_dedup.webhook_operation_key('square', webhook_dedup.webhook_key('square', repeat('e', 40)),
                                           'refund', max_length => 45) AS k;
SELECT webhook_dedup.webhook_operation_key('s', 's:e1', 'refund', max_length => 32) AS short_enough,
       webhook_dedup.webhook_operation_key('s', 's:' || repeat('e', 40), 'refund', max_length => 32) AS digest;
-- A named downstream sets the limit: a plain key of 50 characters is too
-- long for Square's payments (45), not for Adyen (64).
SELECT d AS downstream, k, length(k) AS length
  FROM unnest(ARRAY['square_payments', 'adyen']) AS d,
       webhook_dedup.webhook_operation_key('shop', 'shop:' || repeat('e', 31), 'charge', downstream => d) AS k
 ORDER BY length(k);
-- The presets, as the view shows them (their documents in its sources column).
SELECT downstream, carrier, max_length, key_retention
  FROM webhook_dedup.downstream_key_limits ORDER BY downstream;

--
-- 4. Errors.
--
-- webhook_key: 22004 a NULL source or event id; 22023 an empty part (empty
-- and NULL differ: NULL is an absent part)
SELECT webhook_dedup.webhook_key(NULL, 'evt_1');
SELECT webhook_dedup.webhook_key('stripe', NULL);
SELECT webhook_dedup.webhook_key('', 'evt_1');
SELECT webhook_dedup.webhook_key('stripe', '');
SELECT webhook_dedup.webhook_key('stripe', 'evt_1', account => '');
-- webhook_body_key: 22004 a NULL source or payload; 22023 an empty part
SELECT webhook_dedup.webhook_body_key('s', NULL);
SELECT webhook_dedup.webhook_body_key(NULL, 'x'::bytea);
SELECT webhook_dedup.webhook_body_key('s', 'x'::bytea, environment => '');
-- ... an empty body is a body: it has a key
SELECT webhook_dedup.webhook_body_key('s', ''::bytea) AS empty_body;
-- webhook_operation_key: 22004 a NULL argument
SELECT webhook_dedup.webhook_operation_key(NULL, 's:e', 'refund');
SELECT webhook_dedup.webhook_operation_key('s', NULL, 'refund');
SELECT webhook_dedup.webhook_operation_key('s', 's:e', NULL);
SELECT webhook_dedup.webhook_operation_key('s', 's:e', 'refund', max_length => NULL);
-- 22023: an empty part, a part over 255 characters, max_length outside
-- 32..255, an unknown downstream, a max_length the downstream contradicts
SELECT webhook_dedup.webhook_operation_key('s', 's:e', '');
SELECT webhook_dedup.webhook_operation_key('s', repeat('k', 256), 'refund');
SELECT webhook_dedup.webhook_operation_key('s', 's:e', 'refund', max_length => 31);
SELECT webhook_dedup.webhook_operation_key('s', 's:e', 'refund', max_length => 256);
SELECT webhook_dedup.webhook_operation_key('s', 's:e', 'refund', downstream => 'paypal');
SELECT webhook_dedup.webhook_operation_key('s', 's:e', 'refund', max_length => 100, downstream => 'adyen');
-- ... the downstream's own limit restated is no contradiction
SELECT length(webhook_dedup.webhook_operation_key('s', 's:e', 'refund', max_length => 64, downstream => 'adyen')) > 0 AS accepted;
