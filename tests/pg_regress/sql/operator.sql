-- operator.sql: what webhook_dedup_operator does (docs/operations.md):
-- pause and resume a source; the payload archive (keep_payload), its
-- export, erasure (redact, purge_redactions) and redrive after a fix;
-- reconciliation with the provider's own list of events (unseen,
-- reconcile); the maintenance pass and the functions around it. This file
-- runs as the database's superuser; privileges.sql shows the same calls
-- refused to roles without webhook_dedup_operator.
--
-- SQLSTATEs in this file:
--   22004  a NULL source, state, include_keys, dry_run, run or argument of
--          export_deliveries, event id
--   22023  a bad source or key, not exactly one scope for redact, an empty
--          account, an infinite time, since not before until, max outside
--          its range, an unknown state, more than 100,000 ids; a threshold
--          or window of duplicate_rate_alerts out of range; a shard_count
--          out of range
--   P0002  cancel_redrive of an unknown run
--   55000  purge_redactions in the redaction's own transaction;
--          distribute() without Citus
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. pause stops webhook_next taking a source's keys while something its
--    processing needs is down; intake goes on. It parks the pending and
--    failed keys and returns how many; resume makes them due again, oldest
--    first, and returns how many.
--
SELECT webhook_dedup.webhook_enqueue('ops_paused', 'ops_paused:evt_' || n, convert_to('{"n":' || n || '}', 'UTF8')) AS enqueued
  FROM generate_series(1, 2) AS n ORDER BY n;
SELECT webhook_dedup.pause('ops_paused', 'the warehouse API is down') AS parked;
SELECT count(*) AS taken FROM webhook_dedup.webhook_next('ops_paused');
-- Intake goes on: a new delivery is stored, and parked by the webhook_next
-- that meets it. A claim is not refused (its receiver processes the key).
SELECT webhook_dedup.webhook_enqueue('ops_paused', 'ops_paused:evt_3', '{"n":3}'::bytea) AS enqueued;
SELECT count(*) AS taken FROM webhook_dedup.webhook_next('ops_paused');
SELECT outcome FROM webhook_dedup.webhook_claim('ops_paused', 'ops_paused:evt_4');
-- The pause is recorded in webhook_dedup.sources (a row is made for a
-- source without one); key_states shows the paused backlog.
SELECT source, paused_at IS NOT NULL AS paused, paused_by = session_user AS paused_by_me, pause_reason
  FROM webhook_dedup.sources WHERE source = 'ops_paused';
SELECT source, state, keys, paused_keys, paused_at IS NOT NULL AS paused
  FROM webhook_dedup.key_states WHERE source = 'ops_paused' ORDER BY state;
-- Pausing a paused source keeps the first pause and takes the new reason.
SELECT webhook_dedup.pause('ops_paused', 'still down') AS parked;
SELECT pause_reason FROM webhook_dedup.sources WHERE source = 'ops_paused';
SELECT webhook_dedup.resume('ops_paused') AS unparked;
SELECT idem_key, attempt FROM webhook_dedup.webhook_next('ops_paused', batch => 10) ORDER BY idem_key;
SELECT paused_at, paused_by, pause_reason FROM webhook_dedup.sources WHERE source = 'ops_paused';
-- Resuming a source that is not paused unparks nothing.
SELECT webhook_dedup.resume('ops_paused') AS unparked;
-- 22004 a NULL source; 22023 an empty one, or one over 255 characters
SELECT webhook_dedup.pause(NULL);
SELECT webhook_dedup.pause('');
SELECT webhook_dedup.resume(repeat('s', 256));

--
-- 2. The payload archive: a source with keep_payload archives each key's
--    first delivery and each conflicting one (raw body and headers);
--    export_deliveries gives them back, each also as one JSON document
--    (webhook_dedup.delivery/1) for replaying into staging.
--
INSERT INTO webhook_dedup.sources (source, keep_payload, payload_retention)
VALUES ('ops_archive', true, '14 days');
SELECT webhook_dedup.webhook_enqueue('ops_archive', 'ops_archive:evt_1', convert_to('{"order":"X-1"}', 'UTF8'),
                                     event_type => 'order.paid', headers => '{"X-Shop": "one"}') AS evt_1;
SELECT claim_token AS token FROM webhook_dedup.webhook_claim('ops_archive', 'ops_archive:evt_2',
                                                             payload => convert_to('{"order":"X-2"}', 'UTF8'),
                                                             event_type => 'order.paid') \gset c2_
SELECT webhook_dedup.webhook_complete('ops_archive', 'ops_archive:evt_2', :'c2_token', '{"invoice": "in_2"}') AS completed;
SELECT outcome FROM webhook_dedup.webhook_claim('ops_archive', 'ops_archive:evt_2',
                                                payload => convert_to('{"order":"X-2b"}', 'UTF8'));
SELECT idem_key, event_id, event_type, conflict, state, convert_from(payload, 'UTF8') AS payload, headers,
       delivery ->> 'format' AS format, delivery ->> 'scheme' AS scheme,
       convert_from(decode(delivery ->> 'body_base64', 'base64'), 'UTF8') AS body
  FROM webhook_dedup.export_deliveries('ops_archive', now() - interval '1 day', now() + interval '1 day',
                                       include_conflicts => true)
 ORDER BY idem_key, conflict;
-- filtered by type and by the key's state now; without conflicts
SELECT idem_key, state FROM webhook_dedup.export_deliveries('ops_archive', now() - interval '1 day',
                                                            now() + interval '1 day', states => ARRAY['pending']);
SELECT count(*) AS exported FROM webhook_dedup.export_deliveries('ops_archive', now() - interval '1 day',
                                                                 now() + interval '1 day', event_types => ARRAY['refund']);
-- A source that keeps no payloads has nothing to export, and a NOTICE says
-- why.
SET client_min_messages = notice;
\set VERBOSITY default
SELECT count(*) AS exported FROM webhook_dedup.export_deliveries('ops_paused', now() - interval '1 day', now() + interval '1 day');
\set VERBOSITY sqlstate
SET client_min_messages = warning;
-- 22004 a NULL argument (but the filters); 22023 since not before until,
-- an infinite time, max outside 1..100000, an unknown state
SELECT * FROM webhook_dedup.export_deliveries('ops_archive', NULL, now());
SELECT * FROM webhook_dedup.export_deliveries('ops_archive', now(), now() - interval '1 hour');
SELECT * FROM webhook_dedup.export_deliveries('ops_archive', '-infinity', now());
SELECT * FROM webhook_dedup.export_deliveries('ops_archive', now() - interval '1 hour', now(), "max" => 0);
SELECT * FROM webhook_dedup.export_deliveries('ops_archive', now() - interval '1 hour', now(), states => ARRAY['done']);

--
-- 3. Erasure. redact erases what the deliveries of one scope carried (one
--    key, the keys first seen before a time, or one account), keeping the
--    keys: later deliveries are still duplicates, never processed again.
--    A key waiting for a worker cannot be processed without its payload:
--    it becomes dead_lettered.
--
-- Until a redaction is purged its bytes stay in free space; purging in the
-- redaction's own transaction would copy them (55000). With nothing
-- pending, purge_redactions returns no row.
BEGIN;
SELECT * FROM webhook_dedup.redact('ops_archive', idem_key => 'ops_archive:evt_2');
SELECT * FROM webhook_dedup.purge_redactions();
ROLLBACK;
SELECT * FROM webhook_dedup.purge_redactions();
-- The completed key: its result and archived bodies are erased.
SELECT * FROM webhook_dedup.redact('ops_archive', idem_key => 'ops_archive:evt_2');
SELECT outcome, state, result FROM webhook_dedup.webhook_claim('ops_archive', 'ops_archive:evt_2',
                                                               payload => convert_to('{"order":"X-2"}', 'UTF8'));
SELECT state, result, redacted_at IS NOT NULL AS redacted, redacted_by = session_user AS redacted_by_me
  FROM webhook_dedup.key_history WHERE idem_key = 'ops_archive:evt_2';
-- The pending key: dead-lettered, saying why.
SELECT * FROM webhook_dedup.redact('ops_archive', idem_key => 'ops_archive:evt_1');
SELECT idem_key, attempts, last_error FROM webhook_dedup.dead_letters WHERE source = 'ops_archive';
SELECT count(*) AS left_to_export FROM webhook_dedup.export_deliveries('ops_archive', now() - interval '1 day',
                                                                       now() + interval '1 day', include_conflicts => true);
-- A redaction that erased something is recorded, without what it erased
-- (no key, account or time), until purge_redactions makes it final.
SELECT source, keys, deliveries, redacted_by = session_user AS redacted_by_me, purged_at
  FROM webhook_dedup.redactions WHERE source = 'ops_archive' ORDER BY id;
-- Redacting the key again finds nothing left to erase: no key is counted
-- (it keeps its first redaction's who and when), no delivery, no record.
SELECT * FROM webhook_dedup.redact('ops_archive', idem_key => 'ops_archive:evt_2');
SELECT count(*) AS redactions FROM webhook_dedup.redactions WHERE source = 'ops_archive';
-- By account: the keys derived with one account (the third field).
SELECT webhook_dedup.webhook_enqueue('ops_archive', webhook_dedup.webhook_key('ops_archive', 'evt_' || n, account => a),
                                     '{}'::bytea) AS enqueued
  FROM (VALUES (3, 'acct_1'), (4, 'acct_1'), (5, 'acct_2')) AS t(n, a) ORDER BY n;
SELECT * FROM webhook_dedup.redact('ops_archive', account => 'acct_1');
-- 22004 a NULL source; 22023 not exactly one scope, an empty account, an
-- infinite time, a bad key
SELECT * FROM webhook_dedup.redact(NULL, idem_key => 'k');
SELECT * FROM webhook_dedup.redact('ops_archive');
SELECT * FROM webhook_dedup.redact('ops_archive', idem_key => 'k', account => 'a');
SELECT * FROM webhook_dedup.redact('ops_archive', account => '');
SELECT * FROM webhook_dedup.redact('ops_archive', before => 'infinity');
SELECT * FROM webhook_dedup.redact('ops_archive', idem_key => '');
SELECT * FROM webhook_dedup.purge_redactions(NULL);

--
-- 4. Redrive after a fix: dead letters (and, when named, failed keys,
--    unknown outcomes, conflicts) go back to the workers with their
--    payload. A dry run counts; a real run is recorded and the maintenance
--    pass moves its keys.
--
INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES ('ops_redrive', true);
SELECT webhook_dedup.webhook_enqueue('ops_redrive', 'ops_redrive:evt_' || n, convert_to('{"n":' || n || '}', 'UTF8'),
                                     event_type => 'order.paid') AS enqueued
  FROM generate_series(1, 3) AS n ORDER BY n;
SELECT webhook_dedup.webhook_fail('ops_redrive', k, t, 'bug #12', retryable => false) AS new_state
  FROM webhook_dedup.webhook_next('ops_redrive', batch => 3) AS n(source, k, t) ORDER BY k;
SELECT idem_key, attempts, last_error FROM webhook_dedup.dead_letters WHERE source = 'ops_redrive' ORDER BY idem_key;
SELECT run IS NULL AS no_run, matched FROM webhook_dedup.redrive('ops_redrive', dry_run => true);
SELECT run AS run, matched FROM webhook_dedup.redrive('ops_redrive', "max" => 2) \gset redrive_
\echo matched :redrive_matched
SELECT status, matched, moved, skipped, remaining FROM webhook_dedup.redrive_runs WHERE id = :redrive_run;
SET client_min_messages = error;  -- the pass's retention WARNINGs are views.sql's business
SELECT ran, keys_redriven, errors FROM webhook_dedup.run_maintenance();
SET client_min_messages = warning;
SELECT status, matched, moved, skipped, remaining FROM webhook_dedup.redrive_runs WHERE id = :redrive_run;
SELECT idem_key, attempt, convert_from(payload, 'UTF8') AS payload
  FROM webhook_dedup.webhook_next('ops_redrive', batch => 10) ORDER BY idem_key;
-- cancel_redrive stops a run and returns how many keys it moved.
SELECT run AS run FROM webhook_dedup.redrive('ops_redrive') \gset second_
SELECT webhook_dedup.cancel_redrive(:second_run) AS moved;
SELECT status FROM webhook_dedup.redrive_runs WHERE id = :second_run;
-- 22004 a NULL source, states, state, dry_run or run; 22023 no state or an
-- unknown one, since not before until, max below 1; P0002 an unknown run
SELECT * FROM webhook_dedup.redrive(NULL);
SELECT * FROM webhook_dedup.redrive('ops_redrive', states => NULL);
SELECT * FROM webhook_dedup.redrive('ops_redrive', states => ARRAY[NULL]);
SELECT * FROM webhook_dedup.redrive('ops_redrive', dry_run => NULL);
SELECT * FROM webhook_dedup.redrive('ops_redrive', states => ARRAY[]::text[]);
SELECT * FROM webhook_dedup.redrive('ops_redrive', states => ARRAY['completed']);
SELECT * FROM webhook_dedup.redrive('ops_redrive', since => now(), "until" => now() - interval '1 hour');
SELECT * FROM webhook_dedup.redrive('ops_redrive', "max" => 0);
SELECT webhook_dedup.cancel_redrive(NULL);
SELECT webhook_dedup.cancel_redrive(-1);

--
-- 5. Reconciliation with the provider's list of events: unseen gives the
--    ids that never reached the database (keys derived as webhook_receive
--    derives them), in the order given, each once; reconcile enqueues one
--    fetched from the provider's API, marked reconciled.
--
SELECT webhook_dedup.webhook_enqueue('ops_recon', webhook_dedup.webhook_key('ops_recon', 'evt_1'), '{}'::bytea) AS seen;
SELECT * FROM webhook_dedup.unseen('ops_recon', ARRAY['evt_3', 'evt_1', 'evt_2', 'evt_3']);
SELECT webhook_dedup.reconcile('ops_recon', 'evt_2', convert_to('{"id":"evt_2"}', 'UTF8'), event_type => 'order.paid') AS evt_2,
       webhook_dedup.reconcile('ops_recon', 'evt_1', '{}'::bytea) AS evt_1,
       webhook_dedup.reconcile('ops_recon', 'evt_1', '{"other":true}'::bytea) AS evt_1_other;
SELECT * FROM webhook_dedup.unseen('ops_recon', ARRAY['evt_3', 'evt_1', 'evt_2']);
SELECT idem_key, convert_from(payload, 'UTF8') AS payload, event_type
  FROM webhook_dedup.webhook_next('ops_recon', batch => 10) ORDER BY idem_key;
-- scoped like webhook_receive's keys
SELECT * FROM webhook_dedup.unseen('ops_recon', ARRAY['evt_1'], account => 'acct_1');
-- 22004 a NULL source, ids or id; 22023 an empty id or part, over 100,000 ids
SELECT * FROM webhook_dedup.unseen(NULL, ARRAY['e']);
SELECT * FROM webhook_dedup.unseen('ops_recon', NULL);
SELECT * FROM webhook_dedup.unseen('ops_recon', ARRAY['e', NULL]);
SELECT * FROM webhook_dedup.unseen('ops_recon', ARRAY['']);
SELECT * FROM webhook_dedup.unseen('ops_recon', ARRAY['e'], account => '');
SELECT count(*) FROM webhook_dedup.unseen('ops_recon', array_fill('e'::text, ARRAY[100001]));
SELECT webhook_dedup.reconcile('ops_recon', NULL, '{}'::bytea);
SELECT webhook_dedup.reconcile('ops_recon', 'evt_9', NULL);
SELECT webhook_dedup.reconcile('ops_recon', '', '{}'::bytea);

--
-- 6. Maintenance and its neighbours. run_maintenance is one pass of what
--    the background worker runs (its counts depend on every key of the
--    database: see views.sql and docs/operations.md); default_retention
--    is the setting webhook_dedup.retention; distribute and source_node
--    belong to a Citus install.
--
SELECT webhook_dedup.default_retention() AS retention;
SET client_min_messages = error;
SELECT ran, more, errors FROM webhook_dedup.run_maintenance();
SET client_min_messages = warning;
SELECT count(*) > 0 AS passes_recorded FROM webhook_dedup.maintenance_runs;
-- 55000: distribute() needs Citus; source_node answers no row on one server.
SELECT webhook_dedup.distribute();
SELECT * FROM webhook_dedup.source_node('ops_recon');
SELECT * FROM webhook_dedup.source_node('');
-- source_has_history: keys made by webhook_key, or counted deliveries
SELECT webhook_dedup.source_has_history('ops_recon') AS ops_recon,
       webhook_dedup.source_has_history('ops_nothing') AS ops_nothing;
-- duplicate_rate_alerts: 22004 a NULL argument; 22023 a threshold outside
-- 0..1, a window outside 1 minute..366 days
SELECT * FROM webhook_dedup.duplicate_rate_alerts(NULL);
SELECT * FROM webhook_dedup.duplicate_rate_alerts(1.5);
SELECT * FROM webhook_dedup.duplicate_rate_alerts(0.02, '30 seconds');
SELECT * FROM webhook_dedup.duplicate_rate_alerts(0.02, '367 days');
