-- ordering.sql: the out-of-order guard (docs/ordering.md). Deduplication
-- applies an event once, not in order: webhook_advance keeps a watermark
-- per entity (true: the event is the newest, apply it; false: skip it),
-- and the trigger function webhook_monotonic_guard lets a table of your
-- own skip an update whose provider time is older than the stored one.
--
-- SQLSTATEs in this file:
--   22004  a NULL source, entity_id or source_updated_at
--   22023  an empty or over-long source or entity id, an infinite time; a
--          guard trigger without exactly one argument
--   42703  the guard's column does not exist
--   42804  the guard's column is not a timestamptz or timestamp
--   39P01  the guard called other than as a BEFORE ... FOR EACH ROW
--          trigger on INSERT or UPDATE, or called directly
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
SET timezone = 'UTC';
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';

--
-- 1. webhook_advance: newer is true, older is false; at the same time, the
--    same event again is an idempotent re-apply (true), the greater of two
--    sequences wins, and anything else keeps what came first (false).
--
SELECT webhook_dedup.webhook_advance('ordering', 'sub_42', '2026-01-01 10:00:04+00', 'evt_4') AS newer_first;
SELECT webhook_dedup.webhook_advance('ordering', 'sub_42', '2026-01-01 10:00:01+00', 'evt_1') AS older_later;
SELECT webhook_dedup.webhook_advance('ordering', 'sub_42', '2026-01-01 10:00:04+00', 'evt_4') AS same_event_again;
SELECT webhook_dedup.webhook_advance('ordering', 'sub_42', '2026-01-01 10:00:04+00', 'evt_5') AS tie_other_event;
SELECT webhook_dedup.webhook_advance('ordering', 'sub_42', '2026-01-01 10:00:09+00', 'evt_9') AS newer;
-- sequences order events of one instant
SELECT webhook_dedup.webhook_advance('ordering', 'sub_43', '2026-01-01 10:00:00+00', 'evt_a', sequence => 2) AS seq_2;
SELECT webhook_dedup.webhook_advance('ordering', 'sub_43', '2026-01-01 10:00:00+00', 'evt_b', sequence => 1) AS seq_1;
SELECT webhook_dedup.webhook_advance('ordering', 'sub_43', '2026-01-01 10:00:00+00', 'evt_c', sequence => 3) AS seq_3;
-- entities and sources are independent
SELECT webhook_dedup.webhook_advance('ordering', 'sub_44', '2026-01-01 10:00:01+00') AS other_entity,
       webhook_dedup.webhook_advance('ordering_2', 'sub_42', '2026-01-01 10:00:01+00') AS other_source;
-- the same applied in a transaction with the update it protects
CREATE TABLE ordering_subscriptions (id text PRIMARY KEY, status text NOT NULL);
BEGIN;
INSERT INTO ordering_subscriptions
SELECT 'sub_45', 'active' WHERE webhook_dedup.webhook_advance('ordering', 'sub_45', '2026-01-01 10:00:04+00', 'evt_x');
COMMIT;
BEGIN;
UPDATE ordering_subscriptions SET status = 'trialing'
 WHERE id = 'sub_45' AND webhook_dedup.webhook_advance('ordering', 'sub_45', '2026-01-01 10:00:01+00', 'evt_w');
COMMIT;
SELECT * FROM ordering_subscriptions;
-- 22004: a NULL source, entity or time; 22023: an empty or over-long
-- source or entity id, an infinite time
SELECT webhook_dedup.webhook_advance(NULL, 'e', now());
SELECT webhook_dedup.webhook_advance('ordering', NULL, now());
SELECT webhook_dedup.webhook_advance('ordering', 'e', NULL);
SELECT webhook_dedup.webhook_advance('', 'e', now());
SELECT webhook_dedup.webhook_advance('ordering', repeat('e', 256), now());
SELECT webhook_dedup.webhook_advance('ordering', 'e', 'infinity');

--
-- 2. webhook_monotonic_guard on a table of your own: an update whose new
--    time is older than the stored one is skipped (zero rows), also from
--    INSERT ... ON CONFLICT DO UPDATE. Stored NULL passes; an incoming NULL
--    over a stored value is skipped; equal passes; inserts pass.
--
CREATE TABLE ordering_intents (id text PRIMARY KEY, status text, source_updated_at timestamptz);
CREATE TRIGGER ordering_monotonic BEFORE INSERT OR UPDATE ON ordering_intents
  FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('source_updated_at');
-- (RETURNING shows the row written; none when the guard skipped it.)
INSERT INTO ordering_intents VALUES ('pi_1', 'payment_failed', '2026-01-01 10:00:04+00') RETURNING *;
-- older, by an upsert and by an update: skipped
INSERT INTO ordering_intents VALUES ('pi_1', 'processing', '2026-01-01 10:00:01+00')
ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, source_updated_at = EXCLUDED.source_updated_at
RETURNING *;
UPDATE ordering_intents SET status = 'processing', source_updated_at = '2026-01-01 10:00:01+00'
 WHERE id = 'pi_1' RETURNING *;
-- equal: passes
UPDATE ordering_intents SET status = 'still failed', source_updated_at = '2026-01-01 10:00:04+00'
 WHERE id = 'pi_1' RETURNING *;
-- an incoming NULL over a stored time: skipped
UPDATE ordering_intents SET status = 'no time', source_updated_at = NULL WHERE id = 'pi_1' RETURNING *;
-- newer: passes
UPDATE ordering_intents SET status = 'succeeded', source_updated_at = '2026-01-01 10:00:09+00'
 WHERE id = 'pi_1' RETURNING *;
-- a stored NULL: anything passes
INSERT INTO ordering_intents VALUES ('pi_2', 'created', NULL) RETURNING *;
UPDATE ordering_intents SET status = 'timed', source_updated_at = '2026-01-01 10:00:00+00'
 WHERE id = 'pi_2' RETURNING *;
SELECT * FROM ordering_intents ORDER BY id;
-- A timestamp without time zone column works the same.
CREATE TABLE ordering_local (id int PRIMARY KEY, changed timestamp);
CREATE TRIGGER ordering_local_guard BEFORE UPDATE ON ordering_local
  FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('changed');
INSERT INTO ordering_local VALUES (1, '2026-01-01 10:00:04');
UPDATE ordering_local SET changed = '2026-01-01 10:00:01' WHERE id = 1 RETURNING *;
SELECT * FROM ordering_local;

--
-- 3. The trigger's errors come when it fires.
--
CREATE TABLE ordering_bad (id int PRIMARY KEY, changed timestamptz, label text);
INSERT INTO ordering_bad VALUES (1, now(), 'x');
-- 22023: not exactly one argument
CREATE TRIGGER guard_args BEFORE UPDATE ON ordering_bad
  FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard();
UPDATE ordering_bad SET label = 'y';
DROP TRIGGER guard_args ON ordering_bad;
CREATE TRIGGER guard_args BEFORE UPDATE ON ordering_bad
  FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('changed', 'label');
UPDATE ordering_bad SET label = 'y';
DROP TRIGGER guard_args ON ordering_bad;
-- 42703: no such column
CREATE TRIGGER guard_column BEFORE UPDATE ON ordering_bad
  FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('updated_at');
UPDATE ordering_bad SET label = 'y';
DROP TRIGGER guard_column ON ordering_bad;
-- 42804: a column of another type
CREATE TRIGGER guard_type BEFORE UPDATE ON ordering_bad
  FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('label');
UPDATE ordering_bad SET label = 'y';
DROP TRIGGER guard_type ON ordering_bad;
-- 39P01: an AFTER trigger, a statement trigger, and a call that is no
-- trigger at all
CREATE TRIGGER guard_after AFTER UPDATE ON ordering_bad
  FOR EACH ROW EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('changed');
UPDATE ordering_bad SET label = 'y';
DROP TRIGGER guard_after ON ordering_bad;
CREATE TRIGGER guard_statement BEFORE UPDATE ON ordering_bad
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_dedup.webhook_monotonic_guard('changed');
UPDATE ordering_bad SET label = 'y';
DROP TRIGGER guard_statement ON ordering_bad;
SELECT webhook_dedup.webhook_monotonic_guard();
SELECT id, label FROM ordering_bad ORDER BY id;
DROP TABLE ordering_bad, ordering_local, ordering_intents, ordering_subscriptions;
