-- privileges.sql: who may call what (docs/operations.md, "Privileges").
-- The functions are the only way in: the functions that change state are
-- executable by one group role each, webhook_dedup_receiver (claims, the
-- holder's calls, receive, the queue, the outbox's sender calls),
-- webhook_dedup_operator (resolve, forget, pause, maintenance, keys,
-- sources; it is also a reader) or webhook_dedup_reader (the views and
-- read-only functions, also granted to pg_monitor); verification, key
-- derivation and signing are everyone's. No role but the extension's owner
-- reads a table (the operator edits webhook_dedup.sources, but not its
-- pause columns). Login roles of this file are made and dropped here
-- (roles are cluster-wide).
--
-- SQLSTATEs in this file:
--   42501  a call, a view or a table without the role for it
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

DROP ROLE IF EXISTS regress_receiver, regress_operator, regress_reader, regress_nobody;
CREATE ROLE regress_receiver LOGIN IN ROLE webhook_dedup_receiver;
CREATE ROLE regress_operator LOGIN IN ROLE webhook_dedup_operator;
CREATE ROLE regress_reader LOGIN IN ROLE webhook_dedup_reader;
CREATE ROLE regress_nobody LOGIN;

--
-- 1. A receiver: claims, completes, receives, enqueues, takes work.
--
SET ROLE regress_receiver;
SELECT outcome, claim_token AS token FROM webhook_dedup.webhook_claim('privileges', 'privileges:evt_1') \gset r_
\echo :r_outcome
SELECT webhook_dedup.webhook_complete('privileges', 'privileges:evt_1', :'r_token', '{"ok": true}') AS completed;
SELECT webhook_dedup.webhook_enqueue('privileges', 'privileges:evt_2', '{}'::bytea) AS enqueued;
SELECT idem_key FROM webhook_dedup.webhook_next('privileges');
SELECT verified, outcome FROM webhook_dedup.webhook_receive('github', '{}'::bytea,
  webhook_dedup.webhook_sign('github', '{}'::bytea, 's') || '{"X-GitHub-Delivery": "p-1", "X-GitHub-Event": "ping"}',
  ARRAY['s'], source => 'privileges');
SELECT webhook_dedup.webhook_advance('privileges', 'e1', '2026-01-01 00:00:00+00') AS advanced;
SELECT * FROM webhook_dedup.http_answer('duplicate');
-- 42501: an operator's call, a view, a table
SELECT webhook_dedup.webhook_resolve('privileges', 'privileges:evt_1', 'pending');
SELECT webhook_dedup.webhook_forget('privileges', 'privileges:evt_1');
SELECT webhook_dedup.pause('privileges');
SELECT * FROM webhook_dedup.run_maintenance();
SELECT webhook_dedup.add_secret('privileges', 's');
SELECT count(*) FROM webhook_dedup.key_states;
SELECT count(*) FROM webhook_dedup.keys;
SELECT count(*) FROM webhook_dedup.sources;
RESET ROLE;

--
-- 2. An operator: resolves, forgets, pauses, configures sources and keys,
--    reads the views; processes nothing.
--
SET ROLE regress_operator;
SELECT webhook_dedup.webhook_resolve('privileges', 'privileges:evt_1', 'completed') AS previous_state;
SELECT webhook_dedup.pause('privileges', 'maintenance window') AS parked;
SELECT webhook_dedup.resume('privileges') AS unparked;
INSERT INTO webhook_dedup.sources (source, lease, note) VALUES ('privileges_op', '1 minute', 'made by an operator');
UPDATE webhook_dedup.sources SET max_attempts = 3 WHERE source = 'privileges_op';
SELECT source, lease, max_attempts, note FROM webhook_dedup.sources WHERE source = 'privileges_op';
SELECT webhook_dedup.add_secret('privileges_op', 'op-secret', not_before => '2020-01-01') > 0 AS key_added;
SELECT source, fingerprint FROM webhook_dedup.list_secrets('privileges_op');
SELECT source, state, keys FROM webhook_dedup.key_states WHERE source = 'privileges' ORDER BY state;
SELECT webhook_dedup.webhook_forget('privileges', 'privileges:evt_1') AS forgotten;
-- 42501: the pause columns (only pause and resume write them), a
-- receiver's call, the tables of keys and secrets
UPDATE webhook_dedup.sources SET paused_at = now() WHERE source = 'privileges_op';
SELECT * FROM webhook_dedup.webhook_claim('privileges', 'privileges:evt_3');
SELECT * FROM webhook_dedup.webhook_next('privileges');
SELECT count(*) FROM webhook_dedup.keys;
SELECT count(*) FROM webhook_dedup.source_secrets;
RESET ROLE;

--
-- 3. A reader (and pg_monitor): the views and read-only functions.
--
SET ROLE regress_reader;
SELECT source, state, keys FROM webhook_dedup.key_states WHERE source = 'privileges' ORDER BY state;
SELECT count(*) >= 0 AS readable FROM webhook_dedup.duplicate_metrics;
SELECT * FROM webhook_dedup.unseen('privileges', ARRAY['evt_1', 'evt_2']);
SELECT webhook_dedup.source_has_history('privileges') AS has_history;
-- 42501: any call that changes state; the sources table; the secrets
SELECT * FROM webhook_dedup.webhook_claim('privileges', 'privileges:evt_3');
SELECT webhook_dedup.webhook_forget('privileges', 'privileges:evt_2');
SELECT count(*) FROM webhook_dedup.sources;
SELECT * FROM webhook_dedup.list_secrets();
RESET ROLE;
SET ROLE pg_monitor;
SELECT count(*) >= 0 AS readable FROM webhook_dedup.key_states;
RESET ROLE;

--
-- 4. Anyone: verification, keys, signing and the HTTP answer; nothing else.
--
SET ROLE regress_nobody;
SELECT webhook_dedup.webhook_verify('github', '{}'::bytea, webhook_dedup.webhook_sign('github', '{}'::bytea, 's'),
                                    ARRAY['s']) AS verified,
       webhook_dedup.webhook_key('privileges', 'evt_1') AS key,
       webhook_dedup.webhook_operation_key('privileges', 'privileges:evt_1', 'refund') AS operation_key;
SELECT http_status FROM webhook_dedup.http_answer('conflict');
SELECT * FROM webhook_dedup.webhook_claim('privileges', 'privileges:evt_3');
SELECT * FROM webhook_dedup.webhook_receive('github', '{}'::bytea, '{}', ARRAY['s'], source => 'privileges');
SELECT webhook_dedup.webhook_advance('privileges', 'e1', now());
SELECT count(*) FROM webhook_dedup.key_states;
SELECT * FROM webhook_dedup.unseen('privileges', ARRAY['evt_1']);
SELECT count(*) FROM webhook_dedup.providers;
RESET ROLE;

DROP ROLE regress_receiver, regress_operator, regress_reader, regress_nobody;
