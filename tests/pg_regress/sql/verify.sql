-- verify.sql: signature verification and signing, which write nothing and
-- need no role: webhook_verify, webhook_verify_detail, the typed
-- conveniences (webhook_verify_github, ..._stripe, ..._shopify, ..._slack,
-- ..._standard, ..._paddle, ..._twilio), webhook_hmac and webhook_sign.
-- docs/sql-reference.md has every argument; docs/signatures.md every
-- scheme's rule, whose worked examples come first below.
--
-- SQLSTATEs in this file:
--   22023  unknown scheme, algorithm or encoding; no secrets; an empty or
--          whitespace-padded secret; a Standard Webhooks secret that is not
--          canonical base64; headers that are not an object of strings;
--          a bad tolerance; an infinite time; url or the hmac arguments
--          given to a scheme that does not take them, or missing
--   22004  a NULL scheme, payload, headers, secrets, secret or at
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. The worked example of each scheme in docs/signatures.md, as written
--    there: every one is true.
--
-- GitHub's own example (X-Hub-Signature-256 over the raw body).
SELECT webhook_dedup.webhook_verify_github(convert_to('Hello, World!', 'UTF8'),
  'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
  'It''s a Secret to Everybody') AS github;
-- Stripe: a signed timestamp, 10 s before the verifier's clock.
SELECT webhook_dedup.webhook_verify_stripe(convert_to('{"id":"evt_1"}', 'UTF8'),
  't=1700000000,v1=c89214b5b5da833daed6f0b8c5bb6bd58cea9022bd80ccc78230f3942d632925',
  'whsec_test', at => to_timestamp(1700000010)) AS stripe;
SELECT webhook_dedup.webhook_verify_shopify(convert_to('{"id":1}', 'UTF8'),
  '1GxccvotnkOedTjSm8S0m/VA3yAUKshyqT52ccNYHj4=', 'shpss_test') AS shopify;
SELECT webhook_dedup.webhook_verify_slack(convert_to('token=xyz&team_id=T1', 'UTF8'), '1531420618',
  'v0=71b0a7e79a0e37393adc80ac96f8aeffcbcdbf0ff8a0506259cf6bd02e6e13f2',
  '8f742231b10e8888abcd99yyyzzz85a5', at => to_timestamp(1531420678)) AS slack;
SELECT webhook_dedup.webhook_verify_standard(convert_to('{"test": 2432232314}', 'UTF8'),
  'msg_p5jXN8AQM9LWM0D4loKWxJek', '1614265330',
  'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', at => to_timestamp(1614265330)) AS standard;
SELECT webhook_dedup.webhook_verify_paddle(convert_to('{"event_id":"evt_1"}', 'UTF8'),
  'ts=1692619062;h1=33a4cddb49016c8ee749682734188573dfcab9259e344ea840ec716830b92528',
  'pdl_ntfset_test', at => to_timestamp(1692619064)) AS paddle;
SELECT webhook_dedup.webhook_verify_twilio('https://mycompany.com/myapp.php?foo=1&bar=2',
  convert_to('CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030&To=%2B18005551212', 'UTF8'),
  '0/KCTR6DLpKmkAf8muzZqo1nDgQ=', '12345') AS twilio;
-- The other schemes take the request headers as one JSON object and a list
-- of secrets (every secret valid now: rotation).
SELECT webhook_dedup.webhook_verify('zoom',
  convert_to('{"event":"meeting.started","payload":{"object":{"id":"85746065432"}}}', 'UTF8'),
  '{"x-zm-request-timestamp": "1700000000",
    "x-zm-signature": "v0=4937fb9e8e35fb00b5c1d1ffbf3518b24c548278fc007a4548fc9a7053124a60"}',
  ARRAY['secretValueTest'], at => to_timestamp(1700000010)) AS zoom;
SELECT webhook_dedup.webhook_verify('twitter',
  convert_to('{"for_user_id":"2244994945","tweet_create_events":[]}', 'UTF8'),
  '{"x-twitter-webhooks-signature": "sha256=CpOc2dZ+JrkFhzkAW3gWETdo1w8Mx1i/MpqTbkrylcw="}',
  ARRAY['z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu']) AS twitter;
-- Square signs the request URL with the body.
SELECT webhook_dedup.webhook_verify('square',
  convert_to('{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}', 'UTF8'),
  '{"x-square-hmacsha256-signature": "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="}',
  ARRAY['Ibxx_5AKakO-3qeNVR61Dw'],
  url => 'https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9') AS square;
-- HubSpot (v3) signs the method, the URL, the body and a millisecond time.
SELECT webhook_dedup.webhook_verify('hubspot',
  convert_to('{''example_field'':''example_value''}', 'UTF8'),
  '{"X-HubSpot-Request-Timestamp": "15000000",
    "X-HubSpot-Signature-v3": "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw="}',
  ARRAY['yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy'],
  at => to_timestamp(15010),
  url => 'https://www.example.com/webhook_uri', method => 'POST') AS hubspot;
SELECT webhook_dedup.webhook_verify('twitch',
  convert_to('{"subscription":{"type":"channel.follow","version":"2"},"event":{"user_id":"1234","broadcaster_user_id":"1337"}}', 'UTF8'),
  '{"Twitch-Eventsub-Message-Id": "befa7b53-d79d-478f-86b9-120f112b044e",
    "Twitch-Eventsub-Message-Timestamp": "2019-11-16T10:11:12.634234626Z",
    "Twitch-Eventsub-Message-Signature": "sha256=041636d2eb89a63f336ea07fb56f53dbaa07b6a3deb4a5188ccfad5272e153a8"}',
  ARRAY['s3cRe7s3cRe7'], at => to_timestamp(1573899082)) AS twitch;
SELECT webhook_dedup.webhook_verify('intercom',
  convert_to('{"type":"notification_event","id":"notif_ccd8a4d2-3a9b-4c16-b6c2-2a2c5e0f6e11","topic":"ping","data":{"type":"notification_event_data","item":{"type":"ping","message":"something something interzen"}},"created_at":1700000000}', 'UTF8'),
  '{"X-Hub-Signature": "sha1=21679934bbc5f3f8a85f735b4bba7eda428d4ccc"}',
  ARRAY['intercom-client-secret']) AS intercom;
SELECT webhook_dedup.webhook_verify('typeform',
  convert_to('{"event_id":"01HFA7Q0ZP9Y","event_type":"form_response","form_response":{"form_id":"lT4Z3j","token":"a3a12ec67a1365927098a606107fac15","submitted_at":"2023-11-14T22:13:20Z"}}', 'UTF8'),
  '{"Typeform-Signature": "sha256=92PHjvscV4ozEvCOqQBDnKjzG4aaIS3k3LuBmt2wtnk="}',
  ARRAY['abc123']) AS typeform;
SELECT webhook_dedup.webhook_verify('calendly',
  convert_to('{"event":"invitee.created","created_at":"2023-11-14T22:13:20.000000Z","payload":{"uri":"https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAAAAAAAAAAAAAA"}}', 'UTF8'),
  '{"Calendly-Webhook-Signature": "t=1700000000,v1=f60a689b5e8a8dadc86c1f9851458594816c3cfc29d49c847da1331a14d4b23a"}',
  ARRAY['calendly-signing-key'], at => to_timestamp(1700000010)) AS calendly;
-- Standard Webhooks' asymmetric v1a: an Ed25519 signature, a whpk_ public key.
SELECT webhook_dedup.webhook_verify('standard', convert_to('{"test": 2432232314}', 'UTF8'),
  '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
    "webhook-signature": "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag=="}',
  ARRAY['whpk_ZlN4eg7dSSqi0moX9hQUk3orrOouK3QVQSlJa248c/g='],
  at => to_timestamp(1614265330)) AS standard_v1a;
-- Discord (Ed25519, the application's public key in hex).
SELECT webhook_dedup.webhook_verify('discord',
  convert_to('{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}', 'UTF8'),
  '{"X-Signature-Timestamp": "1700000000",
    "X-Signature-Ed25519": "713d2b178c084e5a21c883c18bb975e7613c3d0a44b4ef73875710d852311a327c6fab74e8d7093222c413d9be4ad4018f08e065cd324a211f917efe6d113a03"}',
  ARRAY['b5fc4af677fc5c8d60faebe7e1c9e18c383bc9edc1cb7a91bda54e2711b6b20f'],
  at => to_timestamp(1700000001)) AS discord;
-- SendGrid (ECDSA P-256; the key as SendGrid shows it, base64 DER): its
-- documented example, and a real event batch ending in CRLF.
SELECT webhook_dedup.webhook_verify('sendgrid',
  convert_to('{"category":"example_payload","event":"test_event","message_id":"message_id"}', 'UTF8'),
  '{"X-Twilio-Email-Event-Webhook-Timestamp": "1588788367",
    "X-Twilio-Email-Event-Webhook-Signature": "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="}',
  ARRAY['MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=='],
  at => to_timestamp(1588788367)) AS sendgrid;
SELECT webhook_dedup.webhook_verify('sendgrid',
  convert_to(E'[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]\r\n', 'UTF8'),
  '{"X-Twilio-Email-Event-Webhook-Timestamp": "1600112502",
    "X-Twilio-Email-Event-Webhook-Signature": "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="}',
  ARRAY['MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=='],
  at => to_timestamp(1600112502)) AS sendgrid_batch;
-- Mailgun signs a timestamp and a token inside the body, no header.
SELECT webhook_dedup.webhook_verify('mailgun',
  convert_to('{"signature":{"timestamp":"1403645220","token":"5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6","signature":"9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33"},"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered"}}', 'UTF8'),
  '{}', ARRAY['key-3ax6xnjp29jd6fds4gc373sgvjxteol0'],
  at => to_timestamp(1403645220)) AS mailgun;
-- Linear: the body's webhookTimestamp (milliseconds) must be within 60 s.
SELECT webhook_dedup.webhook_verify('linear',
  convert_to('{"action":"create","type":"Issue","createdAt":"2023-11-14T22:13:19.000Z","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Test"},"webhookTimestamp":1700000000000}', 'UTF8'),
  '{"Linear-Signature": "cd66da886bac222a179d331b7766e8479b6aacb47b2d1a449f48e8e3237b59a0"}',
  ARRAY['lin_wh_test_secret'], at => to_timestamp(1700000000)) AS linear;
-- ... and 61 s later it is too old (the doc's note under the example).
SELECT valid, reason FROM webhook_dedup.webhook_verify_detail('linear',
  convert_to('{"action":"create","type":"Issue","createdAt":"2023-11-14T22:13:19.000Z","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Test"},"webhookTimestamp":1700000000000}', 'UTF8'),
  '{"Linear-Signature": "cd66da886bac222a179d331b7766e8479b6aacb47b2d1a449f48e8e3237b59a0"}',
  ARRAY['lin_wh_test_secret'], at => to_timestamp(1700000061));
-- The generic scheme: you name the header, prefix, algorithm and encoding.
SELECT webhook_dedup.webhook_verify('hmac', convert_to('payload', 'UTF8'),
  '{"X-Signature": "sha512=n5F5f4zlOh4DeiHaSlG6FAtL0iF334I+3fLrZRwzk8Q4QWinztjqU8xtc/ruZKDuuMTrQg5n+TOlg991ClSpSw=="}',
  ARRAY['k'], signature_header => 'X-Signature', signature_prefix => 'sha512=',
  algorithm => 'sha512', encoding => 'base64') AS hmac;

--
-- 2. What does not verify is false, never an error: a changed body, a
--    header sent under another case (names match case-insensitively), a
--    header given as an array (a header sent once, as some frameworks pass
--    every header), no header at all.
--
SELECT webhook_dedup.webhook_verify('github', convert_to('Hello, World?', 'UTF8'),
  '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}',
  ARRAY['It''s a Secret to Everybody']) AS tampered_body;
SELECT webhook_dedup.webhook_verify('github', convert_to('Hello, World!', 'UTF8'),
  '{"x-hub-SIGNATURE-256": ["sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"]}',
  ARRAY['It''s a Secret to Everybody']) AS any_case_and_array;
SELECT webhook_dedup.webhook_verify('github', convert_to('Hello, World!', 'UTF8'), '{}',
  ARRAY['It''s a Secret to Everybody']) AS no_header;
-- The typed conveniences take the header itself: NULL is an absent header.
SELECT webhook_dedup.webhook_verify_github(convert_to('Hello, World!', 'UTF8'), NULL,
  'It''s a Secret to Everybody') AS null_header;

--
-- 3. webhook_verify_detail says why, which secret matched (1-based: an old
--    secret that stops matching is one to retire) and the signed time. A
--    Stripe delivery signed with the second of two secrets at 1700000000:
--
SELECT webhook_dedup.webhook_sign('stripe', convert_to('body', 'UTF8'), 'whsec_new',
                                  at => to_timestamp(1700000000)) AS stripe_headers \gset
SELECT :'stripe_headers'::jsonb ->> 'Stripe-Signature' AS "Stripe-Signature";
-- at the signing time; 301 s after it (the window is 300 s, inclusive);
-- 301 s before it (the window is symmetric: a clock behind the sender's)
SELECT at_offset, d.*
  FROM (VALUES (0), (300), (301), (-300), (-301)) AS t(at_offset),
       webhook_dedup.webhook_verify_detail('stripe', convert_to('body', 'UTF8'), :'stripe_headers'::jsonb,
                                           ARRAY['whsec_old', 'whsec_new'],
                                           at => to_timestamp(1700000000 + at_offset)) AS d
 ORDER BY at_offset;
-- every other reason
SELECT what, d.valid, d.reason, d.secret_index
  FROM (VALUES
          ('no signature header', '{}'::jsonb),
          ('an unknown version only', '{"Stripe-Signature": "t=1700000000,v0=00"}'),
          ('not key=value pairs', '{"Stripe-Signature": "garbage"}'),
          ('the header sent twice', '{"Stripe-Signature": ["t=1700000000,v1=00", "t=1700000000,v1=01"]}'),
          ('a signature by another secret',
           webhook_dedup.webhook_sign('stripe', convert_to('body', 'UTF8'), 'whsec_other', at => to_timestamp(1700000000))))
       AS t(what, headers),
       webhook_dedup.webhook_verify_detail('stripe', convert_to('body', 'UTF8'), t.headers,
                                           ARRAY['whsec_old', 'whsec_new'], at => to_timestamp(1700000000)) AS d
 ORDER BY what;
-- A tolerance of the call's own replaces the provider's window: 10 minutes.
SELECT valid, reason FROM webhook_dedup.webhook_verify_detail('stripe', convert_to('body', 'UTF8'),
  :'stripe_headers'::jsonb, ARRAY['whsec_new'], tolerance => '10 minutes', at => to_timestamp(1700000600));

--
-- 4. webhook_sign gives the headers a sender sends; webhook_verify accepts
--    them. Fixed times, so the output is fixed.
--
SELECT scheme, webhook_dedup.webhook_sign(scheme, convert_to('{"id":"evt_1"}', 'UTF8'), 'sekrit',
                                          at => to_timestamp(1700000000)) AS headers
  FROM unnest(ARRAY['github', 'stripe', 'shopify', 'slack', 'paddle']) AS scheme
 ORDER BY scheme;
-- Standard Webhooks needs the message id; the secret is whsec_ + base64.
-- (The example of docs/sql-reference.md, with a fixed time.)
SELECT webhook_dedup.webhook_sign('standard', '{"type":"invoice.paid"}'::bytea,
                                  'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', msg_id => 'msg_1',
                                  at => to_timestamp(1700000000)) AS standard;
-- Twilio signs the URL: it is required.
SELECT webhook_dedup.webhook_sign('twilio', convert_to('a=1&b=2', 'UTF8'), 'sekrit',
                                  url => 'https://h.example/x?a=1') AS twilio;
-- The generic scheme, then its verification with the same description.
SELECT webhook_dedup.webhook_sign('hmac', convert_to('x', 'UTF8'), 'k', signature_header => 'X-Sig',
                                  signature_prefix => 'sha1=', algorithm => 'sha1') AS hmac_headers \gset
SELECT :'hmac_headers' AS hmac_headers,
       webhook_dedup.webhook_verify('hmac', convert_to('x', 'UTF8'), :'hmac_headers'::jsonb, ARRAY['k'],
                                    signature_header => 'x-sig', signature_prefix => 'sha1=',
                                    algorithm => 'sha1') AS verifies;
-- Round trips: what webhook_sign makes, the typed convenience accepts, and
-- a changed body does not verify.
SELECT webhook_dedup.webhook_verify_slack(convert_to('a=1&b=2', 'UTF8'), h ->> 'X-Slack-Request-Timestamp',
                                          h ->> 'X-Slack-Signature', 'sekrit', at => to_timestamp(1700000000)) AS slack,
       webhook_dedup.webhook_verify_slack(convert_to('a=1&b=3', 'UTF8'), h ->> 'X-Slack-Request-Timestamp',
                                          h ->> 'X-Slack-Signature', 'sekrit', at => to_timestamp(1700000000)) AS slack_changed
  FROM webhook_dedup.webhook_sign('slack', convert_to('a=1&b=2', 'UTF8'), 'sekrit', at => to_timestamp(1700000000)) AS h;
SELECT webhook_dedup.webhook_verify_standard(convert_to('a=1&b=2', 'UTF8'), h ->> 'webhook-id', h ->> 'webhook-timestamp',
                                             h ->> 'webhook-signature', 'whsec_c2Vrcml0', at => to_timestamp(1700000000)) AS standard
  FROM webhook_dedup.webhook_sign('standard', convert_to('a=1&b=2', 'UTF8'), 'whsec_c2Vrcml0', msg_id => 'msg_1',
                                  at => to_timestamp(1700000000)) AS h;
SELECT webhook_dedup.webhook_verify_twilio('https://h.example/x?a=1', convert_to('a=1&b=2', 'UTF8'),
                                           h ->> 'X-Twilio-Signature', 'sekrit') AS twilio
  FROM webhook_dedup.webhook_sign('twilio', convert_to('a=1&b=2', 'UTF8'), 'sekrit', url => 'https://h.example/x?a=1') AS h;

--
-- 5. webhook_hmac: the raw HMAC. RFC 4231's test case 2 (SHA-256); the
--    algorithm's name in any case; sha1 and sha512 lengths. STRICT: a NULL
--    argument gives NULL.
--
SELECT encode(webhook_dedup.webhook_hmac(convert_to('what do ya want for nothing?', 'UTF8'),
                                         convert_to('Jefe', 'UTF8')), 'hex') AS rfc4231_case2;
SELECT length(webhook_dedup.webhook_hmac('x'::bytea, 'k'::bytea, 'SHA1')) AS sha1_bytes,
       length(webhook_dedup.webhook_hmac('x'::bytea, 'k'::bytea, 'sha512')) AS sha512_bytes,
       webhook_dedup.webhook_hmac(NULL, 'k'::bytea) IS NULL AS null_payload_is_null;

--
-- 6. Errors: a misconfiguration is an error, never a silent false.
--
-- 22023: an unknown scheme (names are case-insensitive: GitHub is github)
SELECT webhook_dedup.webhook_verify('GitHub', 'x'::bytea, '{}', ARRAY['s']) AS case_insensitive;
SELECT webhook_dedup.webhook_verify('gitlab', 'x'::bytea, '{}', ARRAY['s']);
-- 22023: no secrets at all
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{}', ARRAY[]::text[]);
-- 22023: an empty secret, and one with leading or trailing whitespace (a
-- copy-paste accident; the message names its position, never its value)
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{}', ARRAY['ok', '']);
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{}', ARRAY['secret ']);
-- 22023: a Standard Webhooks secret that is not canonical base64 after whsec_
SELECT webhook_dedup.webhook_verify('standard', 'x'::bytea, '{}', ARRAY['whsec_not base64!']);
-- 22023: headers that are not an object of strings or arrays of strings
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '[]', ARRAY['s']);
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{"X-Hub-Signature-256": 1}', ARRAY['s']);
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{"X-Hub-Signature-256": {"a": "b"}}', ARRAY['s']);
-- 22023: a tolerance that is negative, over 365 days, or has months
SELECT webhook_dedup.webhook_verify('stripe', 'x'::bytea, '{}', ARRAY['s'], tolerance => '-1 second');
SELECT webhook_dedup.webhook_verify('stripe', 'x'::bytea, '{}', ARRAY['s'], tolerance => '366 days');
SELECT webhook_dedup.webhook_verify('stripe', 'x'::bytea, '{}', ARRAY['s'], tolerance => '1 month');
-- ... while 0 and 365 days are accepted
SELECT webhook_dedup.webhook_verify('stripe', 'x'::bytea, '{}', ARRAY['s'], tolerance => '0') AS zero,
       webhook_dedup.webhook_verify('stripe', 'x'::bytea, '{}', ARRAY['s'], tolerance => '365 days') AS a_year;
-- 22023: an infinite clock
SELECT webhook_dedup.webhook_verify('stripe', 'x'::bytea, '{}', ARRAY['s'], at => 'infinity');
-- 22023: url given to a scheme that does not sign it; missing for twilio
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{}', ARRAY['s'], url => 'https://h.example/');
SELECT webhook_dedup.webhook_verify('twilio', 'x'::bytea, '{}', ARRAY['s']);
-- 22023: the hmac arguments given to another scheme; missing for hmac;
-- an unknown algorithm or encoding
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{}', ARRAY['s'], signature_header => 'X-Sig');
SELECT webhook_dedup.webhook_verify('hmac', 'x'::bytea, '{}', ARRAY['s']);
SELECT webhook_dedup.webhook_verify('hmac', 'x'::bytea, '{}', ARRAY['s'], signature_header => 'X-Sig', algorithm => 'md5');
SELECT webhook_dedup.webhook_verify('hmac', 'x'::bytea, '{}', ARRAY['s'], signature_header => 'X-Sig', encoding => 'base32');
-- 22004: a NULL scheme, payload, headers, secrets, element of secrets, at
SELECT webhook_dedup.webhook_verify(NULL, 'x'::bytea, '{}', ARRAY['s']);
SELECT webhook_dedup.webhook_verify('github', NULL, '{}', ARRAY['s']);
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, NULL, ARRAY['s']);
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{}', NULL);
SELECT webhook_dedup.webhook_verify('github', 'x'::bytea, '{}', ARRAY['s', NULL]);
SELECT webhook_dedup.webhook_verify('stripe', 'x'::bytea, '{}', ARRAY['s'], at => NULL);
-- webhook_verify_detail raises the same errors
SELECT * FROM webhook_dedup.webhook_verify_detail('gitlab', 'x'::bytea, '{}', ARRAY['s']);
SELECT * FROM webhook_dedup.webhook_verify_detail('github', 'x'::bytea, '{}', NULL);
-- The typed conveniences: 22004 for a NULL payload or secret
SELECT webhook_dedup.webhook_verify_github(NULL, 'sha256=00', 's');
SELECT webhook_dedup.webhook_verify_stripe('x'::bytea, 't=1,v1=00', NULL);
-- webhook_hmac: 22023 an empty secret or an unknown algorithm
SELECT webhook_dedup.webhook_hmac('x'::bytea, ''::bytea);
SELECT webhook_dedup.webhook_hmac('x'::bytea, 'k'::bytea, 'md5');
-- webhook_sign: the secret follows webhook_verify's rules (22023); msg_id
-- for standard and url for twilio are required (22004), signature_header
-- for hmac (22023, as for webhook_verify)
SELECT webhook_dedup.webhook_sign('github', 'x'::bytea, ' padded');
SELECT webhook_dedup.webhook_sign('standard', 'x'::bytea, 'whsec_c2Vrcml0', at => to_timestamp(1700000000));
SELECT webhook_dedup.webhook_sign('twilio', 'x'::bytea, 'sekrit');
SELECT webhook_dedup.webhook_sign('hmac', 'x'::bytea, 'sekrit');
SELECT webhook_dedup.webhook_sign('github', NULL, 'sekrit');
