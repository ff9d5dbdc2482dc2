-- The hand-written sender loop that does not hold a transaction open during
-- the call (what outbox_take_ack_apart.sql does): the oldest pending row is
-- marked 'sending' until a deadline and committed, then marked sent. Two
-- updates, two commits. A row whose deadline passed is not taken again
-- here (the hand-written loop has no lapse): it is the cost floor of a
-- lease, not a complete sender.
UPDATE bench.user_outbox SET state = 'sending', sent_at = now() + interval '1 minute'
 WHERE id = (SELECT id FROM bench.user_outbox WHERE target = 'bench-t' AND state = 'pending'
              ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id \gset
UPDATE bench.user_outbox SET state = 'sent', response = '{"sent": true}', sent_at = now() WHERE id = :id;
