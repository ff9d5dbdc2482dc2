-- claim.sql: the claim state machine, claim-and-process: webhook_claim,
-- webhook_claim_many, webhook_complete, and the holder's calls
-- (webhook_checkpoint, webhook_extend_lease, webhook_fail,
-- webhook_mark_unknown), then the operator's webhook_resolve and
-- webhook_forget. docs/design.md, "The state machine", has the diagram
-- and the table of outcomes this file walks through.
--
-- Every call runs autocommitted, as a receiver calls it; leases that must
-- expire are 10 ms long, and a pg_sleep outlives them. Tokens are kept in
-- psql variables (\gset) and never shown.
--
-- SQLSTATEs in this file:
--   22004  a NULL source, idem_key, claim_token, new_state, retryable,
--          step, lease, or a NULL element of webhook_claim_many's keys
--   22023  an empty or over-long source or key; a lease that is not
--          positive, over 365 days or has months; a retry_after outside
--          0..365 days; an empty step; a state that is no target of
--          webhook_resolve
--   P0002  an unknown key (complete, fail, mark_unknown, checkpoint,
--          extend_lease, resolve)
--   25006  a claim in a read-only transaction
--   55000  a claim while webhook_dedup.keys is published without a replica
--          identity
--   42P10  a claim while a publication's column list does not cover the
--          replica identity
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. The first delivery is claimed: process it. It gets a claim token
--    and a lease (here 5 minutes): attempt 1, state processing.
--
SELECT outcome, attempt, state, claim_token AS token,
       lease_expires_at > clock_timestamp() + interval '4 minutes' AS lease_live,
       first_seen_at <= clock_timestamp() AS first_seen
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_1', lease => '5 minutes', event_type => 'order.paid') \gset c1_
\echo :c1_outcome attempt :c1_attempt :c1_state lease_live :c1_lease_live first_seen :c1_first_seen
-- A retry while the lease is live: in_progress, no token. Do not process.
SELECT outcome, claim_token IS NULL AS no_token, attempt, state, result, last_step,
       lease_expires_at > clock_timestamp() AS lease_live
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_1');
-- The holder records its progress (a reclaim after a crash resumes from
-- it) and extends its lease: both need the current token.
SELECT webhook_dedup.webhook_checkpoint('claims', 'claims:evt_1', :'c1_token', 'charged') AS checkpointed;
SELECT webhook_dedup.webhook_extend_lease('claims', 'claims:evt_1', :'c1_token', '10 minutes')
         > clock_timestamp() + interval '9 minutes' AS extended;
-- Another token (a stale holder's) changes nothing: false, or NULL.
SELECT webhook_dedup.webhook_complete('claims', 'claims:evt_1', '00000000-0000-0000-0000-000000000000') AS stale_complete,
       webhook_dedup.webhook_checkpoint('claims', 'claims:evt_1', '00000000-0000-0000-0000-000000000000', 'x') AS stale_checkpoint,
       webhook_dedup.webhook_extend_lease('claims', 'claims:evt_1', '00000000-0000-0000-0000-000000000000', '1 minute') AS stale_extend,
       webhook_dedup.webhook_fail('claims', 'claims:evt_1', '00000000-0000-0000-0000-000000000000', 'boom') AS stale_fail,
       webhook_dedup.webhook_mark_unknown('claims', 'claims:evt_1', '00000000-0000-0000-0000-000000000000') AS stale_unknown;
-- The holder completes, in the same transaction as its own writes, with
-- the result later duplicates get back.
BEGIN;
SELECT webhook_dedup.webhook_complete('claims', 'claims:evt_1', :'c1_token', '{"order": "A-1"}') AS completed;
COMMIT;
-- A redelivery, now or a week later: duplicate, with the stored result and
-- the last step. Nothing is processed again. Completing twice is false.
SELECT outcome, claim_token IS NULL AS no_token, attempt, state, result, last_step
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_1');
SELECT webhook_dedup.webhook_complete('claims', 'claims:evt_1', :'c1_token', '{"order": "again"}') AS completed_again;

--
-- 2. Fingerprints: with a payload, its SHA-256 is the key's fingerprint.
--    The same bytes again are a duplicate; other bytes under the same key
--    are a conflict (recorded in webhook_dedup.conflicts), which gets
--    neither the result nor the last step. A delivery without a payload is
--    never a conflict.
--
SELECT outcome, claim_token AS token
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_2', payload => '{"amount": 10}'::bytea) \gset c2_
\echo :c2_outcome
SELECT webhook_dedup.webhook_complete('claims', 'claims:evt_2', :'c2_token', '{"ok": true}') AS completed;
SELECT outcome, state, result
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_2', payload => '{"amount": 10}'::bytea);
SELECT outcome, state, result, last_step
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_2', payload => '{"amount": 99}'::bytea);
SELECT outcome, state, result
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_2');
SELECT source, idem_key FROM webhook_dedup.conflicts WHERE source = 'claims' ORDER BY idem_key;

--
-- 3. A holder that dies: its lease expires and the next delivery reclaims
--    the key (attempt 2, a new token, the last step it checkpointed). The
--    dead holder's token is fenced out.
--
SELECT outcome, claim_token AS token
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_3', lease => '10 milliseconds') \gset c3_
SELECT webhook_dedup.webhook_checkpoint('claims', 'claims:evt_3', :'c3_token', 'step 1') AS checkpointed;
SELECT pg_sleep(0.05);
SELECT outcome, attempt, state, last_step, claim_token AS token
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_3', lease => '5 minutes') \gset r3_
\echo :r3_outcome attempt :r3_attempt :r3_state last_step :r3_last_step
SELECT webhook_dedup.webhook_complete('claims', 'claims:evt_3', :'c3_token') AS old_holder_completes,
       webhook_dedup.webhook_complete('claims', 'claims:evt_3', :'r3_token') AS new_holder_completes;
-- Fencing is by token, not by clock: a holder whose lease expired but that
-- nobody reclaimed still completes.
SELECT claim_token AS token
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_4', lease => '10 milliseconds') \gset c4_
SELECT pg_sleep(0.05);
SELECT webhook_dedup.webhook_complete('claims', 'claims:evt_4', :'c4_token') AS late_but_unclaimed_completes;

--
-- 4. Failures. A retryable failure is failed, due again after retry_after
--    (or the backoff: 30 s for attempt 1): a delivery before that is
--    retry_later. An operator may make it due now (webhook_resolve to
--    failed); the next delivery reclaims it. A failure that is not
--    retryable is dead_lettered, and stays so.
--
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('claims', 'claims:evt_5') \gset c5_
SELECT webhook_dedup.webhook_fail('claims', 'claims:evt_5', :'c5_token', 'the API answered 503') AS new_state;
SELECT outcome, attempt, state, claim_token IS NULL AS no_token
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_5');
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_5', 'failed') AS previous_state;
SELECT outcome, attempt, state, claim_token AS token
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_5') \gset r5_
\echo :r5_outcome attempt :r5_attempt :r5_state
SELECT webhook_dedup.webhook_fail('claims', 'claims:evt_5', :'r5_token', 'card declined', retryable => false) AS new_state;
SELECT outcome, attempt, state FROM webhook_dedup.webhook_claim('claims', 'claims:evt_5');
-- A retry_after of its own: due at once with 0.
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('claims', 'claims:evt_6') \gset c6_
SELECT webhook_dedup.webhook_fail('claims', 'claims:evt_6', :'c6_token', 'try again', retry_after => '0') AS new_state;
SELECT outcome, attempt, state FROM webhook_dedup.webhook_claim('claims', 'claims:evt_6');
-- The attempts are bounded per source (webhook_dedup.sources.max_attempts,
-- else the setting webhook_dedup.max_attempts): with 2, the second
-- retryable failure is final.
INSERT INTO webhook_dedup.sources (source, max_attempts) VALUES ('claims_twice', 2);
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('claims_twice', 'claims_twice:evt_1') \gset m1_
SELECT webhook_dedup.webhook_fail('claims_twice', 'claims_twice:evt_1', :'m1_token', 'first', retry_after => '0') AS first_failure;
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('claims_twice', 'claims_twice:evt_1') \gset m2_
SELECT webhook_dedup.webhook_fail('claims_twice', 'claims_twice:evt_1', :'m2_token', 'second', retry_after => '0') AS second_failure;
SELECT outcome, attempt, state FROM webhook_dedup.webhook_claim('claims_twice', 'claims_twice:evt_1');
-- A key whose holders keep dying is caught too: its lease expires with no
-- attempts left, and the delivery that finds it dead-letters it.
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('claims_twice', 'claims_twice:evt_2', lease => '10 milliseconds') \gset p1_
SELECT pg_sleep(0.05);
SELECT outcome, attempt FROM webhook_dedup.webhook_claim('claims_twice', 'claims_twice:evt_2', lease => '10 milliseconds');
SELECT pg_sleep(0.05);
SELECT outcome, attempt, state FROM webhook_dedup.webhook_claim('claims_twice', 'claims_twice:evt_2');

--
-- 5. An unknown outcome: the holder called an external system and lost
--    the answer. Nothing processes the key until an operator resolves it;
--    resolving returns the state before.
--
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('claims', 'claims:evt_7') \gset c7_
SELECT webhook_dedup.webhook_mark_unknown('claims', 'claims:evt_7', :'c7_token', 'timeout after 30 s') AS marked;
SELECT outcome, state, claim_token IS NULL AS no_token FROM webhook_dedup.webhook_claim('claims', 'claims:evt_7');
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_7', 'completed', '{"refund": "re_1"}') AS previous_state;
SELECT outcome, state, result FROM webhook_dedup.webhook_claim('claims', 'claims:evt_7');
-- Resolving a key to the state it is in returns that state.
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_7', 'completed') AS previous_state;

--
-- 6. Resolving a processing key fences its holder out: to pending, the
--    queue (or the next delivery) hands it out again.
--
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('claims', 'claims:evt_8') \gset c8_
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_8', 'pending') AS previous_state;
SELECT webhook_dedup.webhook_complete('claims', 'claims:evt_8', :'c8_token') AS fenced_holder_completes;
SELECT outcome, attempt, state, claim_token IS NOT NULL AS has_token
  FROM webhook_dedup.webhook_claim('claims', 'claims:evt_8');
-- ... and to dead_lettered: an operator gives up.
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_8', 'dead_lettered') AS previous_state;
SELECT outcome, state FROM webhook_dedup.webhook_claim('claims', 'claims:evt_8');

--
-- 7. webhook_forget removes a key in any state (true when it existed), so
--    a deliberate replay is processed again: claimed, attempt 1.
--
SELECT webhook_dedup.webhook_forget('claims', 'claims:evt_1') AS forgotten,
       webhook_dedup.webhook_forget('claims', 'claims:never') AS forgotten_unknown;
SELECT outcome, attempt, state FROM webhook_dedup.webhook_claim('claims', 'claims:evt_1');

--
-- 8. webhook_claim_many: several keys of one source in one call, claimed
--    in sorted order (overlapping batches never deadlock), each once.
--
SELECT idem_key, outcome, attempt, state, claim_token IS NOT NULL AS has_token, result
  FROM webhook_dedup.webhook_claim_many('claims',
         ARRAY['claims:batch_b', 'claims:batch_a', 'claims:evt_2', 'claims:batch_b'], lease => '1 minute')
 ORDER BY idem_key;

--
-- 9. The lease when none is given: the source's (webhook_dedup.sources.lease),
--    else webhook_dedup.default_lease (5 minutes).
--
SHOW webhook_dedup.default_lease;
SELECT lease_expires_at > clock_timestamp() + interval '4 minutes 50 seconds'
       AND lease_expires_at <= clock_timestamp() + interval '5 minutes' AS five_minutes
  FROM webhook_dedup.webhook_claim('claims', 'claims:default_lease');
INSERT INTO webhook_dedup.sources (source, lease) VALUES ('claims_long', '1 hour');
SELECT lease_expires_at > clock_timestamp() + interval '59 minutes' AS an_hour
  FROM webhook_dedup.webhook_claim('claims_long', 'claims_long:evt_1');

--
-- 10. Errors.
--
-- 22004: a NULL source or key
SELECT * FROM webhook_dedup.webhook_claim(NULL, 'claims:x');
SELECT * FROM webhook_dedup.webhook_claim('claims', NULL);
-- 22023: an empty source or key, one over 255 characters (characters, not
-- bytes: 255 two-byte characters fit)
SELECT * FROM webhook_dedup.webhook_claim('', 'claims:x');
SELECT * FROM webhook_dedup.webhook_claim('claims', '');
SELECT * FROM webhook_dedup.webhook_claim('claims', repeat('k', 256));
SELECT * FROM webhook_dedup.webhook_claim(repeat('s', 256), 'k');
SELECT outcome FROM webhook_dedup.webhook_claim('claims', repeat('é', 255));
-- 22023: a lease that is not positive, over 365 days, or has months
SELECT * FROM webhook_dedup.webhook_claim('claims', 'claims:x', lease => '0');
SELECT * FROM webhook_dedup.webhook_claim('claims', 'claims:x', lease => '-1 minute');
SELECT * FROM webhook_dedup.webhook_claim('claims', 'claims:x', lease => '366 days');
SELECT * FROM webhook_dedup.webhook_claim('claims', 'claims:x', lease => '1 month');
-- webhook_claim_many: 22004 for a NULL key array or element; 22023 for a
-- bad key (every key is checked before any is claimed)
SELECT * FROM webhook_dedup.webhook_claim_many('claims', NULL);
SELECT * FROM webhook_dedup.webhook_claim_many('claims', ARRAY['claims:y', NULL]);
SELECT * FROM webhook_dedup.webhook_claim_many('claims', ARRAY['claims:y', '']);
SELECT webhook_dedup.webhook_forget('claims', 'claims:y') AS claimed_before_the_error;
-- P0002: an unknown key, for every call that needs one
SELECT webhook_dedup.webhook_complete('claims', 'claims:unknown', '00000000-0000-0000-0000-000000000000');
SELECT webhook_dedup.webhook_fail('claims', 'claims:unknown', '00000000-0000-0000-0000-000000000000', 'e');
SELECT webhook_dedup.webhook_mark_unknown('claims', 'claims:unknown', '00000000-0000-0000-0000-000000000000');
SELECT webhook_dedup.webhook_checkpoint('claims', 'claims:unknown', '00000000-0000-0000-0000-000000000000', 's');
SELECT webhook_dedup.webhook_extend_lease('claims', 'claims:unknown', '00000000-0000-0000-0000-000000000000', '1 minute');
SELECT webhook_dedup.webhook_resolve('claims', 'claims:unknown', 'completed');
-- 22004: a NULL token, retryable, step, lease or new_state
SELECT webhook_dedup.webhook_complete('claims', 'claims:evt_2', NULL);
SELECT webhook_dedup.webhook_fail('claims', 'claims:evt_2', '00000000-0000-0000-0000-000000000000', 'e', retryable => NULL);
SELECT webhook_dedup.webhook_checkpoint('claims', 'claims:evt_2', '00000000-0000-0000-0000-000000000000', NULL);
SELECT webhook_dedup.webhook_extend_lease('claims', 'claims:evt_2', '00000000-0000-0000-0000-000000000000', NULL);
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_2', NULL);
-- 22023: an empty step; a retry_after outside 0..365 days or with months; a
-- lease extension that is not positive
SELECT webhook_dedup.webhook_checkpoint('claims', 'claims:evt_2', '00000000-0000-0000-0000-000000000000', '');
SELECT webhook_dedup.webhook_fail('claims', 'claims:evt_2', '00000000-0000-0000-0000-000000000000', 'e', retry_after => '-1 second');
SELECT webhook_dedup.webhook_fail('claims', 'claims:evt_2', '00000000-0000-0000-0000-000000000000', 'e', retry_after => '366 days');
SELECT webhook_dedup.webhook_fail('claims', 'claims:evt_2', '00000000-0000-0000-0000-000000000000', 'e', retry_after => '1 month');
SELECT webhook_dedup.webhook_extend_lease('claims', 'claims:evt_2', '00000000-0000-0000-0000-000000000000', '0');
-- 22023: webhook_resolve's targets are completed, failed, dead_lettered and
-- pending; processing and unknown_outcome are states, not targets
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_2', 'processing');
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_2', 'unknown_outcome');
SELECT webhook_dedup.webhook_resolve('claims', 'claims:evt_2', 'done');
-- webhook_forget: the key rules
SELECT webhook_dedup.webhook_forget('claims', NULL);
SELECT webhook_dedup.webhook_forget('', 'claims:evt_2');

--
-- 11. Transactions. A claim runs in the caller's transaction: a rollback
--     frees it.
--
BEGIN;
SELECT outcome FROM webhook_dedup.webhook_claim('claims', 'claims:rolled_back');
ROLLBACK;
SELECT outcome, attempt FROM webhook_dedup.webhook_claim('claims', 'claims:rolled_back');
-- 25006: every call that writes, in a read-only transaction (as on a
-- standby).
BEGIN READ ONLY;
SELECT * FROM webhook_dedup.webhook_claim('claims', 'claims:read_only');
ROLLBACK;
-- ... while key derivation, verification and signing answer there.
BEGIN READ ONLY;
SELECT webhook_dedup.webhook_key('claims', 'evt_1') AS key;
ROLLBACK;

--
-- 12. Publications of webhook_dedup.keys: a claim is an INSERT ... ON
--     CONFLICT DO UPDATE, so it raises what PostgreSQL raises for one, at
--     its start, whether or not the key exists (also when it writes without
--     an SQL plan).
--
SET client_min_messages = error;
CREATE PUBLICATION regress_keys FOR TABLE webhook_dedup.keys;
SET client_min_messages = warning;
-- 55000: the table publishes updates and has no replica identity
ALTER TABLE webhook_dedup.keys REPLICA IDENTITY NOTHING;
SELECT * FROM webhook_dedup.webhook_claim('claims', 'claims:published');
SELECT * FROM webhook_dedup.webhook_claim('claims', 'claims:evt_2');
ALTER TABLE webhook_dedup.keys REPLICA IDENTITY DEFAULT;
DROP PUBLICATION regress_keys;
-- 42P10: a publication's column list that does not cover the replica
-- identity (the primary key)
SET client_min_messages = error;
CREATE PUBLICATION regress_keys FOR TABLE webhook_dedup.keys (source);
SET client_min_messages = warning;
SELECT * FROM webhook_dedup.webhook_claim('claims', 'claims:published');
DROP PUBLICATION regress_keys;
-- Without the publication, the claim goes through.
SELECT outcome FROM webhook_dedup.webhook_claim('claims', 'claims:published');
