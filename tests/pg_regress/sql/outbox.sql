-- outbox.sql: the transactional outbox (docs/outbox.md). The holder of a
-- key records its downstream calls (intents) in its own transaction with
-- webhook_outbox_put; senders take them with webhook_outbox_next, each
-- leased with a lease token, and report with webhook_outbox_ack, _fail or
-- _unknown; an operator decides with webhook_outbox_resolve. The views
-- outbox_backlog, outbox_dead_letters and outbox_unknown_outcomes show
-- them. Intent ids and lease tokens are kept in psql variables.
--
-- SQLSTATEs in this file:
--   22004  a NULL operation, request, batch, id or lease token, new_state
--   22023  an empty operation or target, one over 255 characters; a bad
--          max_length or downstream; a batch outside 1..1000, a bad lease;
--          a retry_after with months; a state that is no target of
--          webhook_outbox_resolve
--   P0002  an unknown key (put), an unknown intent (ack, fail, unknown,
--          resolve)
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. The holder of a key writes intents in the transaction of its business
--    write and completion. A second put of the same operation (a retried
--    handler) writes nothing and returns the first intent's id. A token
--    that does not hold the lease writes nothing: NULL.
--
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('outbox', 'outbox:evt_1') \gset c1_
BEGIN;
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_1', :'c1_token', 'refund', 'payments',
                                        '{"order": "C-1", "amount_cents": 500}', downstream => 'stripe') AS id \gset refund_
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_1', :'c1_token', 'refund', 'payments',
                                        '{"order": "C-1", "amount_cents": 500}', downstream => 'stripe') = :refund_id AS same_intent;
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_1', :'c1_token', 'email:receipt', 'email',
                                        '{"to": "a@example.com"}', downstream_idempotent => false) AS id \gset email_
SELECT :email_id <> :refund_id AS another_intent;
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_1', '00000000-0000-0000-0000-000000000000', 'ship',
                                        'shipping', '{}') AS stale_token_put;
SELECT webhook_dedup.webhook_complete('outbox', 'outbox:evt_1', :'c1_token') AS completed;
COMMIT;
-- An intent rolls back with the transaction that wrote it.
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('outbox', 'outbox:evt_2') \gset c2_
BEGIN;
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_2', :'c2_token', 'refund', 'payments', '{}') IS NOT NULL AS written;
ROLLBACK;
-- Once the key is completed, its token writes nothing either.
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_1', :'c1_token', 'ship', 'shipping', '{}') AS after_completion;
-- The backlog per target: what is undelivered, in flight, due.
SELECT target, undelivered, pending, in_flight, failed, due, unknown_outcome, dead_lettered
  FROM webhook_dedup.outbox_backlog WHERE target IN ('payments', 'email') ORDER BY target;

--
-- 2. A sender takes due intents of its target, leased, with the
--    downstream key to send (webhook_operation_key of the event and the
--    operation: the same on every attempt).
--
SELECT id, lease_token, downstream_key, target, operation, request, attempt, source, idem_key,
       downstream_idempotent, lease_expires_at > clock_timestamp() AS leased
  FROM webhook_dedup.webhook_outbox_next('payments', lease => '1 minute') \gset p1_
\echo :p1_target :p1_operation :p1_downstream_key attempt :p1_attempt :p1_request idempotent :p1_downstream_idempotent leased :p1_leased
SELECT :p1_id = :refund_id AS the_refund,
       :'p1_downstream_key' = webhook_dedup.webhook_operation_key('outbox', 'outbox:evt_1', 'refund') AS key_of_the_event;
-- Another sender of the target finds nothing: the intent is leased.
SELECT count(*) AS taken FROM webhook_dedup.webhook_outbox_next('payments');
-- The call timed out: a retryable failure, due again at once here (by
-- default after the backoff). Attempt 2 sends the same key; the first
-- lease token is fenced out, the current one acknowledges, once.
SELECT webhook_dedup.webhook_outbox_fail(:p1_id, :'p1_lease_token', 'timeout', retry_after => '0') AS new_state;
SELECT id, lease_token, downstream_key, attempt
  FROM webhook_dedup.webhook_outbox_next('payments', lease => '1 minute') \gset p2_
SELECT :p2_attempt AS attempt, :'p2_downstream_key' = :'p1_downstream_key' AS same_downstream_key;
SELECT webhook_dedup.webhook_outbox_ack(:p1_id, :'p1_lease_token', '{"refund": "re_1"}') AS first_lease_acks,
       webhook_dedup.webhook_outbox_ack(:p2_id, :'p2_lease_token', '{"refund": "re_1"}') AS current_lease_acks;
SELECT webhook_dedup.webhook_outbox_ack(:p2_id, :'p2_lease_token') AS acked_twice;
SELECT count(*) AS left_to_send FROM webhook_dedup.webhook_outbox_next('payments');

--
-- 3. The e-mail: its downstream takes no idempotency key. Sent, and the
--    answer lost: unknown_outcome, never sent again automatically; an
--    operator decides (here: it was delivered) and gets the state before.
--
SELECT id, lease_token, downstream_idempotent
  FROM webhook_dedup.webhook_outbox_next('email', lease => '1 minute') \gset e1_
\echo downstream_idempotent :e1_downstream_idempotent
SELECT webhook_dedup.webhook_outbox_unknown(:e1_id, :'e1_lease_token', 'connection reset after send') AS marked;
SELECT count(*) AS taken FROM webhook_dedup.webhook_outbox_next('email');
SELECT target, operation, source, idem_key, attempts, last_error
  FROM webhook_dedup.outbox_unknown_outcomes WHERE target = 'email';
SELECT webhook_dedup.webhook_outbox_resolve(:e1_id, 'completed', '{"message": "m_1"}') AS previous_state;
SELECT count(*) AS unknown_left FROM webhook_dedup.outbox_unknown_outcomes WHERE target = 'email';

--
-- 4. Failures that are not retryable, and attempts running out, are dead
--    letters (max_attempts of the source: 2 here). An operator sends a dead
--    letter again with webhook_outbox_resolve(..., 'pending'): same key,
--    its attempts start over.
--
INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('outbox_twice', 2);
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('outbox_twice', 'outbox_twice:evt_1') \gset c3_
SELECT webhook_dedup.webhook_outbox_put('outbox_twice', 'outbox_twice:evt_1', :'c3_token', 'refund', 'refunds', '{}') AS id \gset d_
SELECT webhook_dedup.webhook_complete('outbox_twice', 'outbox_twice:evt_1', :'c3_token') AS completed;
SELECT id, lease_token FROM webhook_dedup.webhook_outbox_next('refunds', lease => '1 minute') \gset d1_
SELECT webhook_dedup.webhook_outbox_fail(:d1_id, :'d1_lease_token', '500 from the API', retry_after => '0') AS first_failure;
SELECT id, lease_token, attempt FROM webhook_dedup.webhook_outbox_next('refunds', lease => '1 minute') \gset d2_
SELECT webhook_dedup.webhook_outbox_fail(:d2_id, :'d2_lease_token', '500 again', retry_after => '0') AS second_failure;
SELECT webhook_dedup.webhook_outbox_fail(:d2_id, :'d2_lease_token', 'stale') AS stale_fail;
SELECT target, operation, attempts, last_error FROM webhook_dedup.outbox_dead_letters WHERE target = 'refunds';
SELECT webhook_dedup.webhook_outbox_resolve(:d_id, 'pending') AS previous_state;
SELECT attempt, downstream_key FROM webhook_dedup.webhook_outbox_next('refunds', lease => '1 minute');
-- Resolving fences the sender that holds the intent.
SELECT webhook_dedup.webhook_outbox_resolve(:d_id, 'dead_lettered') AS previous_state;
-- To failed: sent again now, its attempts starting over; a failure that is
-- not retryable is final at once.
SELECT webhook_dedup.webhook_outbox_resolve(:d_id, 'failed') AS previous_state;
SELECT id, lease_token, attempt FROM webhook_dedup.webhook_outbox_next('refunds', lease => '1 minute') \gset d3_
\echo attempt :d3_attempt
SELECT webhook_dedup.webhook_outbox_fail(:d3_id, :'d3_lease_token', '400: bad request', retryable => false) AS new_state;

--
-- 5. A sender that dies: its lease lapses. An intent whose downstream
--    deduplicates is sent again (attempt 2); one whose downstream does not
--    is parked as unknown_outcome instead.
--
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('outbox', 'outbox:evt_3') \gset c4_
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_3', :'c4_token', 'charge', 'lapse', '{}') IS NOT NULL AS put_charge,
       webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_3', :'c4_token', 'notify', 'lapse', '{}',
                                        downstream_idempotent => false) IS NOT NULL AS put_notify;
SELECT webhook_dedup.webhook_complete('outbox', 'outbox:evt_3', :'c4_token') AS completed;
SELECT operation, attempt FROM webhook_dedup.webhook_outbox_next('lapse', lease => '10 milliseconds', batch => 10)
 ORDER BY operation;
SELECT pg_sleep(0.05);
SELECT operation, attempt FROM webhook_dedup.webhook_outbox_next('lapse', lease => '1 minute', batch => 10)
 ORDER BY operation;
SELECT target, operation, last_error IS NOT NULL AS says_why FROM webhook_dedup.outbox_unknown_outcomes
 WHERE target = 'lapse';

--
-- 6. Errors.
--
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('outbox', 'outbox:evt_9') \gset c9_
-- put: P0002 an unknown key; 22004 a NULL operation or request; 22023 an
-- empty operation, a target over 255 characters, a bad max_length or
-- downstream (the rules of webhook_operation_key)
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:unknown', :'c9_token', 'op', 't', '{}');
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_9', :'c9_token', NULL, 't', '{}');
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_9', :'c9_token', 'op', 't', NULL);
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_9', :'c9_token', '', 't', '{}');
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_9', :'c9_token', 'op', '', '{}');
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_9', :'c9_token', 'op', repeat('t', 256), '{}');
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_9', :'c9_token', 'op', 't', '{}', max_length => 20);
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_9', :'c9_token', 'op', 't', '{}', downstream => 'nope');
SELECT webhook_dedup.webhook_outbox_put('outbox', 'outbox:evt_9', :'c9_token', 'op', 't', '{}', max_length => 60, downstream => 'adyen');
-- none of those wrote an intent
SELECT count(*) AS intents FROM webhook_dedup.outbox_backlog WHERE target = 't';
-- next: 22004 a NULL batch; 22023 a batch outside 1..1000, an empty target,
-- a bad lease
SELECT * FROM webhook_dedup.webhook_outbox_next('t', batch => NULL);
SELECT * FROM webhook_dedup.webhook_outbox_next('t', batch => 0);
SELECT * FROM webhook_dedup.webhook_outbox_next('t', batch => 1001);
SELECT * FROM webhook_dedup.webhook_outbox_next('');
SELECT * FROM webhook_dedup.webhook_outbox_next('t', lease => '-1 second');
-- ack, fail, unknown, resolve: 22004 a NULL id or token; P0002 an unknown
-- intent; 22023 a retry_after with months, a target state that is not one
SELECT webhook_dedup.webhook_outbox_ack(NULL, '00000000-0000-0000-0000-000000000000');
SELECT webhook_dedup.webhook_outbox_ack(:refund_id, NULL);
SELECT webhook_dedup.webhook_outbox_ack(-1, '00000000-0000-0000-0000-000000000000');
SELECT webhook_dedup.webhook_outbox_fail(-1, '00000000-0000-0000-0000-000000000000', 'e');
SELECT webhook_dedup.webhook_outbox_unknown(-1, '00000000-0000-0000-0000-000000000000');
SELECT webhook_dedup.webhook_outbox_resolve(-1, 'completed');
SELECT webhook_dedup.webhook_outbox_fail(:refund_id, '00000000-0000-0000-0000-000000000000', 'e', retry_after => '1 mon');
SELECT webhook_dedup.webhook_outbox_fail(:refund_id, '00000000-0000-0000-0000-000000000000', 'e', retryable => NULL);
SELECT webhook_dedup.webhook_outbox_resolve(:refund_id, NULL);
SELECT webhook_dedup.webhook_outbox_resolve(:refund_id, 'processing');
SELECT webhook_dedup.webhook_outbox_resolve(:refund_id, 'unknown_outcome');
