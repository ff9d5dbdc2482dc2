-- The hand-written sender loop: the oldest pending row of the target,
-- locked with FOR UPDATE SKIP LOCKED, marked sent in the same transaction
-- (bench/reference/user_outbox.sql).
BEGIN;
SELECT id FROM bench.user_outbox WHERE target = 'bench-t' AND state = 'pending'
 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED \gset
UPDATE bench.user_outbox SET state = 'sent', response = '{"sent": true}', sent_at = now() WHERE id = :id;
COMMIT;
