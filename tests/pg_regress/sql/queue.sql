-- queue.sql: persist-then-process. webhook_enqueue stores a delivery (the
-- receiver answers 200 at once); workers take due keys with webhook_next,
-- each leased, and finish them with webhook_complete or webhook_fail as a
-- claim-and-process receiver does.
--
-- SQLSTATEs in this file:
--   22004  a NULL payload (enqueue); a NULL batch (next)
--   22023  the key rules of webhook_claim; a batch outside 1..1000, an
--          empty source or a bad lease (next)
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. webhook_enqueue: accepted (a new key, pending with its payload and
--    headers), duplicate (known, in any state: nothing stored), conflict
--    (known with another payload: recorded, nothing stored).
--
SELECT webhook_dedup.webhook_enqueue('queue', 'queue:evt_1', convert_to('{"order": "B-1"}', 'UTF8'),
                                     event_type => 'order.paid', headers => '{"X-Request-Id": "r1"}') AS evt_1;
SELECT webhook_dedup.webhook_enqueue('queue', 'queue:evt_2', convert_to('{"order": "B-2"}', 'UTF8'),
                                     event_type => 'order.paid') AS evt_2;
SELECT webhook_dedup.webhook_enqueue('queue', 'queue:evt_1', convert_to('{"order": "B-1"}', 'UTF8')) AS evt_1_again;
SELECT webhook_dedup.webhook_enqueue('queue', 'queue:evt_1', convert_to('{"order": "other"}', 'UTF8')) AS evt_1_other;
-- The work due now, per source (the view webhook_dedup.queue_backlog).
SELECT source, due_keys FROM webhook_dedup.queue_backlog WHERE source = 'queue';

--
-- 2. Workers: the oldest due key first, leased to the caller with its own
--    token, the stored payload, headers and event type. A second worker
--    gets the next key (a leased key is never handed to another); a third
--    finds nothing due.
--
SELECT idem_key, claim_token AS token, attempt, convert_from(payload, 'UTF8') AS payload, event_type,
       last_step, headers
  FROM webhook_dedup.webhook_next('queue', lease => '5 minutes') \gset a_
\echo worker A took :a_idem_key attempt :a_attempt payload :a_payload type :a_event_type headers :a_headers
SELECT idem_key, claim_token AS token, attempt, convert_from(payload, 'UTF8') AS payload, headers
  FROM webhook_dedup.webhook_next('queue', lease => '5 minutes') \gset b_
\echo worker B took :b_idem_key attempt :b_attempt payload :b_payload
SELECT count(*) AS due FROM webhook_dedup.webhook_next('queue');
-- Worker B completes; worker A checkpoints, then fails retryably, due at once.
SELECT webhook_dedup.webhook_complete('queue', :'b_idem_key', :'b_token', '{"shipped": "B-2"}') AS b_completed;
SELECT webhook_dedup.webhook_checkpoint('queue', :'a_idem_key', :'a_token', 'reserved stock') AS a_checkpointed;
SELECT webhook_dedup.webhook_fail('queue', :'a_idem_key', :'a_token', 'warehouse down', retry_after => '0') AS a_failed;
-- The retry is due: taken again, attempt 2, resuming from the checkpoint.
SELECT idem_key, claim_token AS token, attempt, last_step
  FROM webhook_dedup.webhook_next('queue', lease => '5 minutes') \gset a2_
\echo retry of :a2_idem_key attempt :a2_attempt last_step :a2_last_step
SELECT webhook_dedup.webhook_complete('queue', :'a2_idem_key', :'a2_token', '{"shipped": "B-1"}') AS a_completed;
-- A late delivery of a queued key that is done: duplicate, with its result.
SELECT outcome, result FROM webhook_dedup.webhook_claim('queue', 'queue:evt_1');
SELECT webhook_dedup.webhook_enqueue('queue', 'queue:evt_2', convert_to('{"order": "B-2"}', 'UTF8')) AS evt_2_again;

--
-- 3. Batches: up to batch keys at once, oldest first.
--
SELECT webhook_dedup.webhook_enqueue('queue', 'queue:evt_' || n, convert_to('{"n": ' || n || '}', 'UTF8')) AS enqueued
  FROM generate_series(3, 5) AS n ORDER BY n;
SELECT idem_key, attempt, convert_from(payload, 'UTF8') AS payload
  FROM webhook_dedup.webhook_next('queue', lease => '10 milliseconds', batch => 2)
 ORDER BY idem_key;
-- Their leases expire (the workers died): they are due again (attempt 2),
-- with the third key (attempt 1).
SELECT pg_sleep(0.05);
SELECT idem_key, attempt FROM webhook_dedup.webhook_next('queue', lease => '5 minutes', batch => 10)
 ORDER BY idem_key;

--
-- 4. A key due again with no attempts left is dead-lettered instead of
--    handed out (a poison message that kills every worker).
--
INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('queue_once', 1);
SELECT webhook_dedup.webhook_enqueue('queue_once', 'queue_once:evt_1', '\x00'::bytea) AS enqueued;
SELECT idem_key, attempt FROM webhook_dedup.webhook_next('queue_once', lease => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT count(*) AS handed_out FROM webhook_dedup.webhook_next('queue_once');
SELECT outcome, state FROM webhook_dedup.webhook_claim('queue_once', 'queue_once:evt_1');

--
-- 5. A claim takes a pending key as well (claimed, attempt 1): a worker
--    then no longer gets it.
--
SELECT webhook_dedup.webhook_enqueue('queue', 'queue:evt_6', '{}'::bytea) AS enqueued;
SELECT outcome, attempt, state, claim_token IS NOT NULL AS has_token
  FROM webhook_dedup.webhook_claim('queue', 'queue:evt_6');
SELECT count(*) AS due FROM webhook_dedup.webhook_next('queue');

--
-- 6. Errors.
--
-- webhook_enqueue: 22004 a NULL payload; 22023 the key rules
SELECT webhook_dedup.webhook_enqueue('queue', 'queue:x', NULL);
SELECT webhook_dedup.webhook_enqueue('queue', '', '{}'::bytea);
SELECT webhook_dedup.webhook_enqueue(NULL, 'queue:x', '{}'::bytea);
-- webhook_next: 22004 a NULL batch; 22023 a batch outside 1..1000, an
-- empty source, a bad lease
SELECT * FROM webhook_dedup.webhook_next('queue', batch => NULL);
SELECT * FROM webhook_dedup.webhook_next('queue', batch => 0);
SELECT * FROM webhook_dedup.webhook_next('queue', batch => 1001);
SELECT * FROM webhook_dedup.webhook_next('');
SELECT * FROM webhook_dedup.webhook_next('queue', lease => '0');
SELECT * FROM webhook_dedup.webhook_next('queue', lease => '1 month');
