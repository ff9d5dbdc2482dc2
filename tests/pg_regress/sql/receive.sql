-- receive.sql: webhook_receive, the whole intake in one call (verify,
-- answer handshakes, read the delivery by the provider's profile, guard
-- against replays, wait for an in-flight duplicate, claim or enqueue) with
-- the HTTP answer in every row (http_status, http_headers, response); and
-- webhook_dedup.http_answer, the same answer for an outcome the caller
-- names. Signatures are made with webhook_sign at fixed times, so no
-- outside tool is needed; rows are shown expanded (\x), one column a line.
--
-- SQLSTATEs in this file:
--   22023  another mode; a wait outside 0..60 s or with months; url given to
--          a scheme that does not take it; the errors of webhook_verify;
--          http_answer: an unknown scheme or outcome, a negative
--          retry_after, an outcome the mode never ends in
--   22004  a NULL mode or body_key_fallback; http_answer: a NULL outcome
--   55000  no secrets passed and none stored for the source and scheme
--   57014  statement_timeout ends the wait for an in-flight duplicate
--   25006  a delivery that would write, in a read-only transaction
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
-- What a receiver keeps between two calls: the claim token of the
-- delivery it processes.
CREATE TEMP TABLE kept (idem_key text PRIMARY KEY, claim_token uuid NOT NULL);

--
-- 1. A signed GitHub delivery. The receiver passes the raw body, the
--    request headers as a JSON object and the secret; GitHub's profile says
--    the event id is the X-GitHub-Delivery header and the type
--    X-GitHub-Event. The key is github:<delivery id> (the source defaults
--    to the scheme's name).
--
\set gh_secret 'gh-regress-secret'
\set issue_body '{"action":"opened","issue":{"number":1},"repository":{"full_name":"octo/hello"}}'
SELECT webhook_dedup.webhook_sign('github', convert_to(:'issue_body', 'UTF8'), :'gh_secret')
       || '{"X-GitHub-Delivery": "d-1", "X-GitHub-Event": "issues"}' AS d1_headers \gset
\echo :d1_headers
-- The first delivery: claimed. Process it; the answer comes after the
-- work committed (response NULL: the receiver's own result is the body).
\x on
WITH r AS (SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                                         ARRAY[:'gh_secret'], lease => '1 hour')),
     keep AS (INSERT INTO kept SELECT idem_key, claim_token FROM r WHERE claim_token IS NOT NULL)
SELECT verified, reject_reason, idem_key, outcome, attempt, claim_token IS NOT NULL AS has_token, result,
       event_type, event_time, last_step, secret_index, http_status, http_headers, response
  FROM r;
\x off
-- GitHub retries while the work runs: in_progress. With wait => '0' it is
-- answered at once, 503 with Retry-After: the holder's remaining lease.
\x on
SELECT verified, idem_key, outcome, claim_token IS NULL AS no_token, http_status, http_headers, response
  FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                     ARRAY[:'gh_secret'], wait => '0');
\x off
-- By default a duplicate of a key another worker holds waits for it (at
-- most GitHub's default_wait, 8 s, holding no lock) and gets the
-- holder's answer if it completes in time. Here the holder does not: the
-- call returns in_progress when its wait of 200 ms runs out.
SELECT outcome, http_status FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'),
                                                               :'d1_headers'::jsonb, ARRAY[:'gh_secret'],
                                                               wait => '200 milliseconds');
-- 57014: a statement_timeout (or a cancel) ends the wait with its error.
SET statement_timeout = '100ms';
SELECT outcome FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                                  ARRAY[:'gh_secret'], wait => '5 seconds');
RESET statement_timeout;
-- The holder completes, with its writes, in one transaction.
SELECT webhook_dedup.webhook_complete('github', 'github:d-1', (SELECT claim_token FROM kept WHERE idem_key = 'github:d-1'),
                                      '{"issue": 1, "labelled": true}') AS completed;
-- GitHub's redelivery (same delivery id, same bytes): duplicate, 200 with
-- the stored result, the body of the first answer.
\x on
SELECT verified, idem_key, outcome, result, http_status, http_headers, response
  FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                     ARRAY[:'gh_secret']);
\x off

--
-- 2. Other content under the same delivery id: conflict, answered 200
--    (a 4xx would only buy retries of the same bytes), recorded for an
--    operator in webhook_dedup.conflicts.
--
\set other_body '{"action":"closed","issue":{"number":1},"repository":{"full_name":"octo/hello"}}'
SELECT webhook_dedup.webhook_sign('github', convert_to(:'other_body', 'UTF8'), :'gh_secret')
       || '{"X-GitHub-Delivery": "d-1", "X-GitHub-Event": "issues"}' AS conflict_headers \gset
SELECT verified, idem_key, outcome, result, http_status, response
  FROM webhook_dedup.webhook_receive('github', convert_to(:'other_body', 'UTF8'), :'conflict_headers'::jsonb,
                                     ARRAY[:'gh_secret']);
SELECT source, idem_key FROM webhook_dedup.conflicts WHERE source = 'github' ORDER BY idem_key;

--
-- 3. The replay guard (on for GitHub, whose delivery id is not signed): a
--    captured delivery re-sent under a new delivery id is answered from
--    the key its body belongs to (idem_key names it); nothing is claimed.
--
SELECT verified, idem_key, outcome, result, http_status
  FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'),
                                     :'d1_headers'::jsonb || '{"X-GitHub-Delivery": "d-9"}', ARRAY[:'gh_secret']);
SELECT webhook_dedup.webhook_forget('github', 'github:d-9') AS d9_existed;

--
-- 4. Refusals. Nothing at all is written for a delivery that does not
--    verify (it is only counted): 401, with the reason in reject_reason. A
--    verified delivery without an event id, or with its id header sent
--    twice, is 400 (no retry can fix it).
--
\x on
-- a forged signature
SELECT verified, reject_reason, idem_key, outcome, secret_index, http_status, http_headers, response
  FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'),
                                     :'d1_headers'::jsonb || jsonb_build_object('X-GitHub-Delivery', 'd-2',
                                                                                'X-Hub-Signature-256', 'sha256=' || repeat('0', 64)),
                                     ARRAY[:'gh_secret']);
\x off
-- a signature header that is no SHA-256 MAC; no signature header; a body
-- changed in transit
SELECT verified, reject_reason, outcome, http_status
  FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'),
                                     :'d1_headers'::jsonb || '{"X-GitHub-Delivery": "d-2", "X-Hub-Signature-256": "sha256=00"}',
                                     ARRAY[:'gh_secret']);
SELECT verified, reject_reason, outcome, http_status
  FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'),
                                     '{"X-GitHub-Delivery": "d-2", "X-GitHub-Event": "issues"}', ARRAY[:'gh_secret']);
SELECT verified, reject_reason, outcome, http_status
  FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body' || ' ', 'UTF8'),
                                     :'d1_headers'::jsonb || '{"X-GitHub-Delivery": "d-2"}', ARRAY[:'gh_secret']);
-- none of them took the key d-2
SELECT webhook_dedup.webhook_forget('github', 'github:d-2') AS d2_existed;
-- no X-GitHub-Delivery: missing_event_id (verified), 400
\set ping_body '{"zen":"Design for failure.","hook_id":1}'
SELECT webhook_dedup.webhook_sign('github', convert_to(:'ping_body', 'UTF8'), :'gh_secret')
       || '{"X-GitHub-Event": "ping"}' AS ping_headers \gset
SELECT verified, reject_reason, idem_key, outcome, http_status, response
  FROM webhook_dedup.webhook_receive('github', convert_to(:'ping_body', 'UTF8'), :'ping_headers'::jsonb,
                                     ARRAY[:'gh_secret']);
-- ... unless the caller asks for the body key (webhook_body_key)
SELECT verified, idem_key = webhook_dedup.webhook_body_key('github', convert_to(:'ping_body', 'UTF8')) AS body_key,
       outcome, http_status
  FROM webhook_dedup.webhook_receive('github', convert_to(:'ping_body', 'UTF8'), :'ping_headers'::jsonb,
                                     ARRAY[:'gh_secret'], body_key_fallback => true);
-- the delivery id header sent twice: which one is GitHub's cannot be told
SELECT verified, reject_reason, outcome, http_status
  FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'),
                                     :'d1_headers'::jsonb || '{"X-GitHub-Delivery": ["d-3", "d-4"]}', ARRAY[:'gh_secret']);

--
-- 5. Persist-then-process (mode => 'enqueue'): accepted and answered 200
--    at once; the workers take it with webhook_next. Again: duplicate.
--
\set push_body '{"ref":"refs/heads/main","after":"abc"}'
SELECT webhook_dedup.webhook_sign('github', convert_to(:'push_body', 'UTF8'), :'gh_secret')
       || '{"X-GitHub-Delivery": "d-5", "X-GitHub-Event": "push"}' AS d5_headers \gset
SELECT verified, idem_key, outcome, claim_token IS NULL AS no_token, attempt, http_status, response
  FROM webhook_dedup.webhook_receive('github', convert_to(:'push_body', 'UTF8'), :'d5_headers'::jsonb,
                                     ARRAY[:'gh_secret'], mode => 'enqueue');
SELECT verified, idem_key, outcome, http_status, response
  FROM webhook_dedup.webhook_receive('github', convert_to(:'push_body', 'UTF8'), :'d5_headers'::jsonb,
                                     ARRAY[:'gh_secret'], mode => 'enqueue');
-- (A worker gets the raw body and the event type; the request headers are
-- not queued with it: headers is NULL. webhook_enqueue queues the headers
-- it is given; a source with keep_payload archives them.)
SELECT idem_key, attempt, event_type, convert_from(payload, 'UTF8') AS payload, headers
  FROM webhook_dedup.webhook_next('github', lease => '1 minute');

--
-- 6. Scopes: environment, account and operation become part of the key
--    (webhook_key's long form); source names the key's source.
--
\set scoped_body '{"action":"created"}'
SELECT webhook_dedup.webhook_sign('github', convert_to(:'scoped_body', 'UTF8'), :'gh_secret')
       || '{"X-GitHub-Delivery": "d-6", "X-GitHub-Event": "star"}' AS d6_headers \gset
SELECT idem_key, outcome
  FROM webhook_dedup.webhook_receive('github', convert_to(:'scoped_body', 'UTF8'), :'d6_headers'::jsonb,
                                     ARRAY[:'gh_secret'], source => 'receive_gh', environment => 'staging',
                                     account => 'octo', operation => 'notify');

--
-- 7. Stripe renders each attempt anew (pending_webhooks, request): the
--    fingerprint covers the event's type and data, so a re-rendered retry
--    is a duplicate; other data under the same id is a conflict. The event
--    time is read from created, the type from type.
--
\set st_first '{"id":"evt_R1","object":"event","type":"invoice.paid","created":1700000000,"pending_webhooks":2,"data":{"object":{"id":"in_1"}}}'
\set st_retry '{"id":"evt_R1","object":"event","type":"invoice.paid","created":1700000000,"pending_webhooks":1,"request":{"id":null},"data":{"object":{"id":"in_1"}}}'
\set st_other '{"id":"evt_R1","object":"event","type":"invoice.paid","created":1700000000,"pending_webhooks":1,"data":{"object":{"id":"in_2"}}}'
SELECT verified, idem_key, outcome, event_type, event_time
  FROM webhook_dedup.webhook_receive('stripe', convert_to(:'st_first', 'UTF8'),
         webhook_dedup.webhook_sign('stripe', convert_to(:'st_first', 'UTF8'), 'whsec_regress', at => to_timestamp(1700000005)),
         ARRAY['whsec_regress'], source => 'receive_stripe', mode => 'enqueue', at => to_timestamp(1700000010));
SELECT verified, idem_key, outcome
  FROM webhook_dedup.webhook_receive('stripe', convert_to(:'st_retry', 'UTF8'),
         webhook_dedup.webhook_sign('stripe', convert_to(:'st_retry', 'UTF8'), 'whsec_regress', at => to_timestamp(1700003600)),
         ARRAY['whsec_regress'], source => 'receive_stripe', mode => 'enqueue', at => to_timestamp(1700003601));
SELECT verified, idem_key, outcome, http_status
  FROM webhook_dedup.webhook_receive('stripe', convert_to(:'st_other', 'UTF8'),
         webhook_dedup.webhook_sign('stripe', convert_to(:'st_other', 'UTF8'), 'whsec_regress', at => to_timestamp(1700003600)),
         ARRAY['whsec_regress'], source => 'receive_stripe', mode => 'enqueue', at => to_timestamp(1700003601));
-- A signature outside Stripe's 300 s window: timestamp_too_old, 401; a
-- source's own tolerance (webhook_dedup.sources.tolerance) widens it.
SELECT verified, reject_reason, http_status
  FROM webhook_dedup.webhook_receive('stripe', convert_to(:'st_first', 'UTF8'),
         webhook_dedup.webhook_sign('stripe', convert_to(:'st_first', 'UTF8'), 'whsec_regress', at => to_timestamp(1700000000)),
         ARRAY['whsec_regress'], source => 'receive_stripe', mode => 'enqueue', at => to_timestamp(1700000600));
INSERT INTO webhook_dedup.sources (source, tolerance) VALUES ('receive_stripe', '15 minutes');
SELECT verified, reject_reason, outcome
  FROM webhook_dedup.webhook_receive('stripe', convert_to(:'st_first', 'UTF8'),
         webhook_dedup.webhook_sign('stripe', convert_to(:'st_first', 'UTF8'), 'whsec_regress', at => to_timestamp(1700000000)),
         ARRAY['whsec_regress'], source => 'receive_stripe', mode => 'enqueue', at => to_timestamp(1700000600));

--
-- 8. Handshakes: control messages answered with the body the provider
--    expects (response, 200); nothing is stored.
--
-- Slack's url_verification echoes the challenge (signed: after verification).
\set slack_body '{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}'
\x on
SELECT verified, reject_reason, idem_key, outcome, http_status, response
  FROM webhook_dedup.webhook_receive('slack', convert_to(:'slack_body', 'UTF8'),
         webhook_dedup.webhook_sign('slack', convert_to(:'slack_body', 'UTF8'), 'slack-regress', at => to_timestamp(1700000000)),
         ARRAY['slack-regress'], source => 'receive_slack', at => to_timestamp(1700000001));
-- Zoom's endpoint.url_validation: the plainToken and its HMAC under the
-- secret token (Zoom's documented token).
\set zoom_body '{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}'
SELECT verified, reject_reason, outcome, http_status, response
  FROM webhook_dedup.webhook_receive('zoom', convert_to(:'zoom_body', 'UTF8'),
         webhook_dedup.webhook_sign('zoom', convert_to(:'zoom_body', 'UTF8'), 'secretValueTest', at => to_timestamp(1700000000)),
         ARRAY['secretValueTest'], source => 'receive_zoom', at => to_timestamp(1700000001));
-- Discord's PING (the example of docs/signatures.md): {"type": 1}.
SELECT verified, outcome, http_status, response
  FROM webhook_dedup.webhook_receive('discord',
    convert_to('{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}', 'UTF8'),
    '{"X-Signature-Timestamp": "1700000000",
      "X-Signature-Ed25519": "713d2b178c084e5a21c883c18bb975e7613c3d0a44b4ef73875710d852311a327c6fab74e8d7093222c413d9be4ad4018f08e065cd324a211f917efe6d113a03"}',
    ARRAY['b5fc4af677fc5c8d60faebe7e1c9e18c383bc9edc1cb7a91bda54e2711b6b20f'],
    source => 'receive_discord', at => to_timestamp(1700000001));
-- X's CRC: an unsigned GET, answered before any verification (verified is
-- false: check outcome first), from the token in the URL.
SELECT verified, reject_reason, outcome, http_status, response
  FROM webhook_dedup.webhook_receive('twitter', ''::bytea, '{}', ARRAY['x-consumer-secret'], source => 'receive_x',
         url => 'https://example.com/webhooks/x?crc_token=9b4507b3-9040-4669-9ca3-6b94edb50553&nonce=1');
\x off
-- An answer that could sign a forged delivery is refused, 400: a Zoom
-- plainToken with a ':' (every signed Zoom message has one), an X token
-- that no base64 alphabet writes (here {"for_user_id":1}).
\set oracle_body '{"payload":{"plainToken":"v0:1:x"},"event":"endpoint.url_validation"}'
SELECT verified, reject_reason, outcome, http_status
  FROM webhook_dedup.webhook_receive('zoom', convert_to(:'oracle_body', 'UTF8'),
         webhook_dedup.webhook_sign('zoom', convert_to(:'oracle_body', 'UTF8'), 'secretValueTest', at => to_timestamp(1700000000)),
         ARRAY['secretValueTest'], source => 'receive_zoom', at => to_timestamp(1700000001));
SELECT verified, reject_reason, outcome, http_status
  FROM webhook_dedup.webhook_receive('twitter', ''::bytea, '{}', ARRAY['x-consumer-secret'], source => 'receive_x',
         url => 'https://example.com/x?crc_token=%7B%22for_user_id%22%3A1%7D');

--
-- 9. Mailgun signs a timestamp and a token, nothing of the body: the token
--    is bound to the body it first came with. The same signature block on
--    other content is refused (token_reused), nothing written.
--
\set mg_body '{"signature":{"timestamp":"1403645220","token":"5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6","signature":"9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33"},"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered"}}'
\set mg_copy '{"signature":{"timestamp":"1403645220","token":"5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6","signature":"9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33"},"event-data":{"id":"forged-1","event":"failed"}}'
SELECT verified, reject_reason, idem_key, outcome, event_type, event_time, http_status
  FROM webhook_dedup.webhook_receive('mailgun', convert_to(:'mg_body', 'UTF8'), '{}',
         ARRAY['key-3ax6xnjp29jd6fds4gc373sgvjxteol0'], source => 'receive_mailgun', at => to_timestamp(1403645220));
SELECT verified, reject_reason, idem_key, outcome, secret_index, http_status, response
  FROM webhook_dedup.webhook_receive('mailgun', convert_to(:'mg_copy', 'UTF8'), '{}',
         ARRAY['key-3ax6xnjp29jd6fds4gc373sgvjxteol0'], source => 'receive_mailgun', at => to_timestamp(1403645220));
-- the same request sent again as it was is a duplicate of its key (in
-- progress: nobody completed it)
SELECT verified, reject_reason, idem_key, outcome, http_status
  FROM webhook_dedup.webhook_receive('mailgun', convert_to(:'mg_body', 'UTF8'), '{}',
         ARRAY['key-3ax6xnjp29jd6fds4gc373sgvjxteol0'], source => 'receive_mailgun', at => to_timestamp(1403645220),
         wait => '0');

--
-- 10. A source's own settings (webhook_dedup.sources). An intake filter:
--     types the source does not accept are ignored (200), nothing stored.
--     A custom source, configured in SQL alone (the example of
--     docs/providers.md, "Custom sources").
--
INSERT INTO webhook_dedup.sources (source, provider, accept_event_types)
VALUES ('receive_filtered', 'github', '{push,pull_request*}');
SELECT webhook_dedup.webhook_sign('github', convert_to(:'ping_body', 'UTF8'), :'gh_secret')
       || '{"X-GitHub-Delivery": "d-7", "X-GitHub-Event": "ping"}' AS d7_headers \gset
SELECT verified, idem_key, outcome, event_type, http_status, response
  FROM webhook_dedup.webhook_receive('github', convert_to(:'ping_body', 'UTF8'), :'d7_headers'::jsonb,
                                     ARRAY[:'gh_secret'], source => 'receive_filtered');
SELECT verified, idem_key, outcome, event_type
  FROM webhook_dedup.webhook_receive('github', convert_to(:'ping_body', 'UTF8'),
                                     :'d7_headers'::jsonb || '{"X-GitHub-Event": "pull_request_review"}',
                                     ARRAY[:'gh_secret'], source => 'receive_filtered');
-- acme signs with the generic scheme; its deliveries carry X-Acme-Delivery,
-- a "kind", a millisecond "at" and an "attempt" counter that changes
-- between attempts (left out of the fingerprint).
INSERT INTO webhook_dedup.sources (source, event_id_from, event_type_from,
                                   event_time_from, event_time_format, fingerprint_pointers)
VALUES ('acme', 'header:X-Acme-Delivery', '/kind', '/at', 'unix_milliseconds', '{/kind,/data}');
\set acme_1 '{"kind":"shipment.created","at":1700000000123,"attempt":1,"data":{"id":"sh_1"}}'
\set acme_2 '{"kind":"shipment.created","at":1700000000123,"attempt":2,"data":{"id":"sh_1"}}'
SELECT verified, idem_key, outcome, event_type, event_time
  FROM webhook_dedup.webhook_receive('hmac', convert_to(:'acme_1', 'UTF8'),
         webhook_dedup.webhook_sign('hmac', convert_to(:'acme_1', 'UTF8'), 'acme-secret',
                                    signature_header => 'X-Acme-Signature', signature_prefix => 'sha256=')
           || '{"X-Acme-Delivery": "a-1"}',
         ARRAY['acme-secret'], source => 'acme', mode => 'enqueue',
         signature_header => 'X-Acme-Signature', signature_prefix => 'sha256=');
SELECT verified, idem_key, outcome
  FROM webhook_dedup.webhook_receive('hmac', convert_to(:'acme_2', 'UTF8'),
         webhook_dedup.webhook_sign('hmac', convert_to(:'acme_2', 'UTF8'), 'acme-secret',
                                    signature_header => 'X-Acme-Signature', signature_prefix => 'sha256=')
           || '{"X-Acme-Delivery": "a-1"}',
         ARRAY['acme-secret'], source => 'acme', mode => 'enqueue',
         signature_header => 'X-Acme-Signature', signature_prefix => 'sha256=');
-- An invalid intake setting is refused when the row is written (22023,
-- naming the column), not when a delivery arrives.
INSERT INTO webhook_dedup.sources (source, event_id_from) VALUES ('receive_bad', 'no-slash');
INSERT INTO webhook_dedup.sources (source, event_time_from) VALUES ('receive_bad', '/at');
INSERT INTO webhook_dedup.sources (source, accept_event_types) VALUES ('receive_bad', '{a*b}');

--
-- 11. webhook_dedup.http_answer: the same answer for an outcome the caller
--     names (after its own work: completed, lease_lost; error when the
--     database could not be asked). The two examples of docs/sql-reference.md
--     come first.
--
SELECT * FROM webhook_dedup.http_answer('in_progress', 'github', retry_after => '12 s');
SELECT * FROM webhook_dedup.http_answer('missing_event_id', 'mailgun');
-- Every outcome, for GitHub: 200 for every success, duplicate, conflict
-- and parked key, 503 for what a retry can fix, 401 and 400 for what it
-- cannot, 500 when the database could not be asked. claimed and reclaimed
-- have no body here: the receiver's own result is the body.
SELECT outcome, a.*
  FROM unnest(ARRAY['claimed', 'reclaimed', 'duplicate', 'conflict', 'in_progress', 'retry_later',
                    'unknown_outcome', 'dead_lettered', 'ignored', 'rejected', 'missing_event_id',
                    'repeated_header', 'refused_handshake', 'completed', 'lease_lost', 'error'])
         WITH ORDINALITY AS o(outcome, n),
       webhook_dedup.http_answer(o.outcome, 'github') AS a
 ORDER BY n;
-- A handshake's body is the answer it was given (what webhook_receive
-- returned in response).
SELECT * FROM webhook_dedup.http_answer('handshake', 'slack', result => '{"challenge": "c"}');
-- The enqueue mode's outcomes (in_progress too: webhook_receive bounds its
-- lock waits by wait in both modes); a duplicate's or completion's result
-- is the body; Retry-After is whole seconds, rounded up.
SELECT outcome, a.* FROM unnest(ARRAY['accepted', 'duplicate', 'conflict', 'in_progress']) WITH ORDINALITY AS o(outcome, n),
       webhook_dedup.http_answer(o.outcome, mode => 'enqueue') AS a ORDER BY n;
SELECT * FROM webhook_dedup.http_answer('completed', result => '{"order": "A-1"}');
SELECT * FROM webhook_dedup.http_answer('retry_later', retry_after => '1.2 seconds');
-- 22023: an unknown scheme, outcome or mode, a negative retry_after or one
-- with months, an outcome the mode never ends in (a claim's when
-- enqueueing, accepted when claiming); 22004: a NULL outcome
SELECT * FROM webhook_dedup.http_answer('duplicate', 'gitlab');
SELECT * FROM webhook_dedup.http_answer('maybe');
SELECT * FROM webhook_dedup.http_answer('duplicate', mode => 'store');
SELECT * FROM webhook_dedup.http_answer('in_progress', retry_after => '-1 second');
SELECT * FROM webhook_dedup.http_answer('in_progress', retry_after => '1 month');
SELECT * FROM webhook_dedup.http_answer('claimed', mode => 'enqueue');
SELECT * FROM webhook_dedup.http_answer('completed', mode => 'enqueue');
SELECT * FROM webhook_dedup.http_answer('accepted');
SELECT * FROM webhook_dedup.http_answer(NULL);

--
-- 12. Errors of webhook_receive.
--
-- 22023: another mode; a wait outside 0..60 seconds or with months; url
-- given to a scheme that does not take it
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            ARRAY[:'gh_secret'], mode => 'store');
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            ARRAY[:'gh_secret'], wait => '61 seconds');
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            ARRAY[:'gh_secret'], wait => '-1 second');
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            ARRAY[:'gh_secret'], wait => '1 month');
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            ARRAY[:'gh_secret'], url => 'https://example.com/hook');
-- 22023 and 22004: the errors of webhook_verify
SELECT * FROM webhook_dedup.webhook_receive('gitlab', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            ARRAY[:'gh_secret']);
SELECT * FROM webhook_dedup.webhook_receive('github', NULL, :'d1_headers'::jsonb, ARRAY[:'gh_secret']);
-- 22004: a NULL mode or body_key_fallback
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            ARRAY[:'gh_secret'], mode => NULL);
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            ARRAY[:'gh_secret'], body_key_fallback => NULL);
-- 55000: no secrets passed, and the source has no key for the scheme
-- (answer 500: the provider retries, and the retry verifies once a key is
-- added; sources_and_secrets.sql adds keys)
SELECT * FROM webhook_dedup.webhook_receive('github', convert_to(:'issue_body', 'UTF8'), :'d1_headers'::jsonb,
                                            source => 'receive_nokeys');
-- 25006: a delivery that would write, in a read-only transaction; one that
-- does not verify is answered there (it writes nothing)
BEGIN READ ONLY;
SELECT outcome FROM webhook_dedup.webhook_receive('github', convert_to(:'push_body', 'UTF8'),
                                                  :'d5_headers'::jsonb || '{"X-GitHub-Delivery": "d-8"}', ARRAY[:'gh_secret'],
                                                  source => 'receive_ro');
ROLLBACK;
BEGIN READ ONLY;
SELECT verified, reject_reason, http_status
  FROM webhook_dedup.webhook_receive('github', convert_to(:'push_body', 'UTF8'),
                                     '{"X-GitHub-Delivery": "d-8", "X-Hub-Signature-256": "sha256=00"}', ARRAY[:'gh_secret'],
                                     source => 'receive_ro');
ROLLBACK;
