-- webhook_outbox_put: a new intent, written only while claim_token holds
-- the key's lease (the fencing is the condition on the locked row, the rule of
-- crate::claim::holds_lease; the key's row is locked until the caller's
-- transaction ends, so no reclaim can slip in between). Under READ
-- COMMITTED a concurrent reclaim is waited for and the condition
-- re-checked on the newest row. A second intent for the same operation of
-- the key inserts nothing. $1 source, $2 idem_key, $3 claim_token,
-- $4 operation, $5 target, $6 request, $7 downstream_key,
-- $8 downstream_idempotent, $9 now. Returns the new intent's id; no row
-- when the token does not hold the lease or the operation has an intent
-- already (src/store/outbox.rs tells which).
--
-- The key is looked up by its primary key alone, and the holder's
-- condition applied to the row the lock returned: a condition on state in
-- the look-up itself would let the planner prefer the partial index
-- keys_open (state <> 'completed'), which stale statistics can make look
-- empty, and scan every open key (measured: 150-900 µs a call on a store
-- whose statistics predate its open keys, against 20 µs).
WITH key AS (
  SELECT k.attempt, k.state, k.claim_token FROM webhook_dedup.keys AS k
   WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1
     FOR NO KEY UPDATE
)
INSERT INTO webhook_dedup.outbox AS o
    (source, idem_key, operation, target, request, downstream_key, downstream_idempotent, key_attempt, state,
     due_at, created_at, updated_at)
SELECT $1, $2, $4, $5, $6, $7, $8, h.attempt, 'pending', $9, $9, $9
  FROM key AS h
 WHERE h.state OPERATOR(pg_catalog.=) 'processing' AND h.claim_token OPERATOR(pg_catalog.=) $3
    ON CONFLICT (source, idem_key, operation) DO NOTHING
RETURNING o.id
