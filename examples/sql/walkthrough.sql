-- A walk through webhook_dedup in psql, to read from top to bottom:
--   A. claim and process: claim a delivery, do its side effect, complete it
--      in the same transaction; a redelivery gets the stored result; the
--      HTTP answer to each, as webhook_dedup.http_answer computes it;
--   B. persist, then process: store deliveries for workers, two workers take
--      them with webhook_next (a leased key is not handed to the other one),
--      each does its side effect and completes in one transaction;
--   C. a downstream call through the outbox: the handler records the call
--      (an intent) in its own transaction, a sender takes it and sends it
--      with a downstream idempotency key that is the same on every attempt.
--
-- Run it in a database where `CREATE EXTENSION webhook_dedup` was done, as
-- its owner (a superuser; the cleanup calls the operator's webhook_forget):
--
--   psql -X -v ON_ERROR_STOP=1 -f examples/sql/walkthrough.sql
--
-- Every step checks what it expects with walkthrough.expect (defined below):
-- a different answer raises an error, which stops psql with a non-zero exit
-- code. Its tables live in the schema walkthrough, dropped at the end; its
-- keys belong to the source 'shop' and are forgotten at the start and at the
-- end, so it can run again. The psql variables (:key, :'token', ...) hold
-- what a receiver would keep between two calls; \gset sets them from a
-- query's columns, with the prefix given after it.

\set ON_ERROR_STOP on
\set QUIET on
\pset tuples_only on
\pset format unaligned
SET client_min_messages = warning;

-- Set-up: a schema of our own, two "business" tables that the side effects
-- write to, and the assertion helper.
DROP SCHEMA IF EXISTS walkthrough CASCADE;
CREATE SCHEMA walkthrough;
CREATE TABLE walkthrough.orders (
    order_id text PRIMARY KEY,
    amount_cents integer NOT NULL,
    idem_key text NOT NULL
);
CREATE TABLE walkthrough.shipments (
    order_id text PRIMARY KEY,
    shipped_by text NOT NULL,
    idem_key text NOT NULL
);
-- expect(condition, what): prints 'ok: <what>' when the condition is true,
-- raises an error otherwise (also when it is NULL).
CREATE FUNCTION walkthrough.expect(condition boolean, what text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF condition IS NOT TRUE THEN
        RAISE EXCEPTION 'walkthrough: expected %', what;
    END IF;
    RETURN 'ok: ' || what;
END
$$;

-- The keys of this walk-through; forget them in case an earlier run stopped
-- half-way (webhook_forget returns false for a key that is not there).
SELECT webhook_dedup.webhook_key('shop', 'evt_1001') AS key,
       webhook_dedup.webhook_key('shop', 'evt_2001') AS queued_key_1,
       webhook_dedup.webhook_key('shop', 'evt_2002') AS queued_key_2,
       webhook_dedup.webhook_key('shop', 'evt_3001') AS outbox_key \gset
SELECT count(*) FILTER (WHERE webhook_dedup.webhook_forget('shop', k)) AS forgotten
FROM unnest(ARRAY[:'key', :'queued_key_1', :'queued_key_2', :'outbox_key']) AS k \gset
-- (and the outbox intent of part C: an owner's clean-up of the table)
DELETE FROM webhook_dedup.outbox WHERE source = 'shop' AND idem_key = :'outbox_key';

\echo
\echo 'A. Claim, process, complete'
\echo

-- A1. A delivery of event evt_1001 arrives from the source 'shop'. Its
-- idempotency key is derived from the source and the provider's event id
-- (a real receiver passes webhook_receive the raw body and headers, which
-- also verifies the signature; docs/sql-reference.md).
\set payload '{"id": "evt_1001", "type": "order.paid", "order": "A-1", "amount_cents": 4200}'
\echo 'the key of evt_1001:' :key
SELECT walkthrough.expect(:'key' = 'shop:evt_1001', 'the key is the source and the event id');

-- A2. Claim it, with the raw body (its SHA-256 becomes the key's
-- fingerprint) and a lease: how long we have to finish.
SELECT outcome, claim_token AS token, attempt
FROM webhook_dedup.webhook_claim('shop', :'key', payload => convert_to(:'payload', 'UTF8'), lease => '5 minutes') \gset first_
SELECT walkthrough.expect(:'first_outcome' = 'claimed', 'the first delivery is claimed: process it');
SELECT walkthrough.expect(:'first_attempt' = '1', 'it is attempt 1');

-- A3. The provider retries while we are still working (a timeout on its
-- side): the lease is live, so the retry is in_progress and gets no token.
-- Do not process it. lease_expires_at says when our lease ends.
SELECT outcome, claim_token IS NULL AS no_token, lease_expires_at - clock_timestamp() AS lease_left
FROM webhook_dedup.webhook_claim('shop', :'key', payload => convert_to(:'payload', 'UTF8')) \gset retry_
SELECT walkthrough.expect(:'retry_outcome' = 'in_progress', 'a retry during the lease is in_progress');
SELECT walkthrough.expect(:'retry_no_token', 'and gets no claim token');
-- The HTTP answer is data too, computed by the database: http_answer gives
-- the status, the headers (a JSON object) and the JSON body for an outcome
-- (webhook_receive returns the same three with every row). A receiver sends
-- them as they are and decides no status itself. Here: 503, with
-- Retry-After saying when our lease ends, so the provider retries then;
-- never a 4xx, which some providers drop for good.
SELECT http_status, http_headers ->> 'Retry-After' AS retry_after, response
FROM webhook_dedup.http_answer(:'retry_outcome', retry_after => :'retry_lease_left') \gset retry_
\echo 'the retry is answered' :retry_http_status :retry_response
SELECT walkthrough.expect(:'retry_http_status' = '503' AND :'retry_retry_after'::int BETWEEN 1 AND 300,
                          'it is answered 503 with Retry-After: the seconds left on our lease');

-- A4. The side effect and the completion in ONE transaction: either both
-- commit or neither does. webhook_complete returns false when our lease was
-- reclaimed meanwhile (another attempt holds the key now): then roll back,
-- and answer http_answer('lease_lost'), a 503 (the provider's retry gets
-- the answer of the attempt that holds the key now).
BEGIN;
INSERT INTO walkthrough.orders VALUES ('A-1', 4200, :'key');
SELECT webhook_dedup.webhook_complete('shop', :'key', :'first_token', '{"status": 200, "order": "A-1"}') AS completed \gset
SELECT walkthrough.expect(:'completed', 'webhook_complete accepts our token');
COMMIT;
-- Committed: our answer is that of a completed job, 200 with our result.
SELECT http_status, response
FROM webhook_dedup.http_answer('completed', result => '{"status": 200, "order": "A-1"}') \gset first_
SELECT walkthrough.expect(:'first_http_status' = '200' AND :'first_response'::jsonb = '{"status": 200, "order": "A-1"}',
                          'our answer is 200 with our result');

-- A5. A redelivery of the same event, an hour or a week later: duplicate,
-- with the result stored at completion (answer 200 with it), and nothing
-- is processed again.
SELECT outcome, result
FROM webhook_dedup.webhook_claim('shop', :'key', payload => convert_to(:'payload', 'UTF8')) \gset dup_
\echo 'the redelivery gets:' :dup_outcome :dup_result
SELECT walkthrough.expect(:'dup_outcome' = 'duplicate', 'a redelivery after completion is a duplicate');
SELECT walkthrough.expect(:'dup_result'::jsonb = '{"status": 200, "order": "A-1"}',
                          'it carries the stored result');
-- Its answer: 200 with the stored result, the very body of the first answer.
SELECT http_status, response FROM webhook_dedup.http_answer(:'dup_outcome', result => :'dup_result') \gset dup_
SELECT walkthrough.expect(:'dup_http_status' = '200' AND :'dup_response'::jsonb = :'first_response'::jsonb,
                          'the redelivery is answered 200 with the first answer''s body');
SELECT walkthrough.expect(count(*) = 1, 'the order was written once')
FROM walkthrough.orders;

\echo
\echo 'B. Persist, then process: two workers'
\echo

-- B1. A receiver that must answer at once stores each delivery and returns
-- 2xx; workers process them later. (webhook_dedup.webhook_receive(..., mode => 'enqueue')
-- does the same after verifying the signature.)
SELECT webhook_dedup.webhook_enqueue('shop', :'queued_key_1', convert_to('{"id": "evt_2001", "order": "B-1"}', 'UTF8'),
                       event_type => 'order.paid') AS enqueued \gset q1_
SELECT webhook_dedup.webhook_enqueue('shop', :'queued_key_2', convert_to('{"id": "evt_2002", "order": "B-2"}', 'UTF8'),
                       event_type => 'order.paid') AS enqueued \gset q2_
SELECT walkthrough.expect(:'q1_enqueued' = 'accepted' AND :'q2_enqueued' = 'accepted',
                          'two deliveries are accepted into the queue');
-- The answer to each: 200 at once (mode => 'enqueue': the outcomes of
-- webhook_enqueue and of webhook_receive(..., mode => 'enqueue')).
SELECT http_status, response FROM webhook_dedup.http_answer(:'q1_enqueued', mode => 'enqueue') \gset q1_
SELECT walkthrough.expect(:'q1_http_status' = '200' AND :'q1_response'::jsonb = '{"status": "accepted"}',
                          'an accepted delivery is answered 200 {"status": "accepted"}');
-- The provider sends evt_2001 again: stored once.
SELECT webhook_dedup.webhook_enqueue('shop', :'queued_key_1', convert_to('{"id": "evt_2001", "order": "B-1"}', 'UTF8'),
                       event_type => 'order.paid') AS enqueued \gset again_
SELECT walkthrough.expect(:'again_enqueued' = 'duplicate', 'the same delivery again is a duplicate');

-- B2. Worker A asks for work (oldest first) and gets evt_2001, leased to it
-- for 5 minutes with its own claim token and the stored payload. It has not
-- finished yet: it keeps the lease.
SELECT idem_key, claim_token AS token, convert_from(payload, 'UTF8')::jsonb ->> 'order' AS order_id
FROM webhook_dedup.webhook_next('shop', lease => '5 minutes') \gset worker_a_
\echo 'worker A took' :worker_a_idem_key
SELECT walkthrough.expect(:'worker_a_idem_key' = :'queued_key_1', 'worker A gets evt_2001, the oldest');

-- B3. Worker B asks next: evt_2001 is leased to worker A, so B gets evt_2002
-- (two workers never get the same key; a key whose lease expired would be
-- handed out again).
SELECT idem_key, claim_token AS token, convert_from(payload, 'UTF8')::jsonb ->> 'order' AS order_id
FROM webhook_dedup.webhook_next('shop', lease => '5 minutes') \gset worker_b_
\echo 'worker B took' :worker_b_idem_key
SELECT walkthrough.expect(:'worker_b_idem_key' = :'queued_key_2', 'worker B gets evt_2002, not the leased evt_2001');

-- B4. Worker B's side effect and completion, in one transaction.
BEGIN;
INSERT INTO walkthrough.shipments VALUES (:'worker_b_order_id', 'worker B', :'worker_b_idem_key');
SELECT webhook_dedup.webhook_complete('shop', :'worker_b_idem_key', :'worker_b_token', '{"shipped": "B-2"}') AS completed \gset worker_b_
SELECT walkthrough.expect(:'worker_b_completed', 'worker B completes evt_2002');
COMMIT;

-- B5. A third worker finds nothing due: evt_2001 is still leased to A.
SELECT count(*) AS due FROM webhook_dedup.webhook_next('shop') \gset third_
SELECT walkthrough.expect(:'third_due' = '0', 'nothing is due while worker A holds evt_2001');

-- B6. Worker A finishes, in one transaction too.
BEGIN;
INSERT INTO walkthrough.shipments VALUES (:'worker_a_order_id', 'worker A', :'worker_a_idem_key');
SELECT webhook_dedup.webhook_complete('shop', :'worker_a_idem_key', :'worker_a_token', '{"shipped": "B-1"}') AS completed \gset worker_a_
SELECT walkthrough.expect(:'worker_a_completed', 'worker A completes evt_2001');
COMMIT;

-- B7. Queued keys answer claims like any other: both are done, each with
-- its result, and each order was shipped once, by the worker that held it.
SELECT outcome, result ->> 'shipped' AS shipped FROM webhook_dedup.webhook_claim('shop', :'queued_key_1') \gset late_
SELECT walkthrough.expect(:'late_outcome' = 'duplicate' AND :'late_shipped' = 'B-1',
                          'a late delivery of evt_2001 gets worker A''s result');
SELECT walkthrough.expect(array_agg(order_id || ' by ' || shipped_by ORDER BY order_id)
                          = ARRAY['B-1 by worker A', 'B-2 by worker B'],
                          'each order was shipped once')
FROM walkthrough.shipments;

\echo
\echo 'C. A downstream call through the outbox'
\echo

-- C1. Event evt_3001 asks for a refund at a payment API, a call that cannot
-- join a transaction. The handler claims the key, then records its business
-- write, the refund's intent and the completion in ONE transaction: the
-- intent exists exactly when the rest does. A retried handler's second put
-- of the same operation writes nothing and returns the first intent.
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('shop', :'outbox_key') \gset refund_
BEGIN;
INSERT INTO walkthrough.orders VALUES ('C-1', 500, :'outbox_key');
SELECT webhook_dedup.webhook_outbox_put('shop', :'outbox_key', :'refund_token', 'refund', 'payments',
                                        '{"order": "C-1", "amount_cents": 500}', downstream => 'stripe') AS id \gset intent_
SELECT webhook_dedup.webhook_outbox_put('shop', :'outbox_key', :'refund_token', 'refund', 'payments',
                                        '{"order": "C-1", "amount_cents": 500}', downstream => 'stripe') AS id \gset again_
SELECT walkthrough.expect(:'again_id' = :'intent_id', 'a second put of the same operation is the first intent');
SELECT webhook_dedup.webhook_complete('shop', :'outbox_key', :'refund_token') AS completed \gset refund_
COMMIT;

-- C2. A sender takes it (leased to it, with a lease token) and sends the
-- request with the intent's downstream key as the Idempotency-Key header.
SELECT id, lease_token, downstream_key, attempt
  FROM webhook_dedup.webhook_outbox_next('payments', lease => '1 minute') \gset first_
\echo 'the sender sends Idempotency-Key:' :first_downstream_key
SELECT walkthrough.expect(:'first_id' = :'intent_id'
                          AND :'first_downstream_key' = webhook_dedup.webhook_operation_key('shop', :'outbox_key', 'refund'),
                          'the sender gets the intent, with a key derived from the event and the operation');

-- C3. The call timed out: the API may have refunded. The API deduplicates by
-- the key, so the sender reports a retryable failure (due again at once
-- here; by default after a backoff).
SELECT webhook_dedup.webhook_outbox_fail(:first_id, :'first_lease_token', 'timeout', retry_after => '0') AS state \gset failed_
SELECT walkthrough.expect(:'failed_state' = 'failed', 'a timed-out call is failed, to be sent again');

-- C4. The next attempt sends the same key: the API answers it with the
-- first call's result instead of refunding twice. Only the current lease
-- token acknowledges it.
SELECT id, lease_token, downstream_key, attempt
  FROM webhook_dedup.webhook_outbox_next('payments', lease => '1 minute') \gset second_
SELECT walkthrough.expect(:'second_attempt' = '2' AND :'second_downstream_key' = :'first_downstream_key',
                          'attempt 2 carries the same downstream key');
SELECT walkthrough.expect(NOT webhook_dedup.webhook_outbox_ack(:first_id, :'first_lease_token', '{"refund": "re_1"}'),
                          'the first attempt''s lease token no longer acknowledges');
SELECT walkthrough.expect(webhook_dedup.webhook_outbox_ack(:second_id, :'second_lease_token', '{"refund": "re_1"}'),
                          'the current lease token acknowledges the delivery');
SELECT count(*) AS due FROM webhook_dedup.webhook_outbox_next('payments') \gset after_
SELECT walkthrough.expect(:'after_due' = '0', 'nothing is left to send');

-- Clean up: the keys (an operator's call), the intent (an owner's delete:
-- delivered intents otherwise go after the source's retention) and the schema.
SELECT count(*) FILTER (WHERE webhook_dedup.webhook_forget('shop', k)) AS forgotten
FROM unnest(ARRAY[:'key', :'queued_key_1', :'queued_key_2', :'outbox_key']) AS k \gset end_
SELECT walkthrough.expect(:'end_forgotten' = '4', 'the four keys are forgotten');
DELETE FROM webhook_dedup.outbox WHERE source = 'shop' AND idem_key = :'outbox_key';
DROP SCHEMA walkthrough CASCADE;
\echo
\echo 'walkthrough complete'
