-- A redrive moves a locked key back to due: pending, due now, for
-- webhook_next (as webhook_resolve(..., 'pending') does: a key out of
-- attempts gets one more), recording the run on the key (key_history). For
-- a conflict the key takes the conflicting delivery's fingerprint, the
-- content it is processed with now, and forgets the old content's stored
-- result and checkpoint.
-- $1 source, $2 idem_key, $3 now, $4 run, $5 the conflict's seen_at (NULL:
-- not a conflict).
UPDATE webhook_dedup.keys AS k
   SET state = 'pending', due_at = $3, next_attempt_at = NULL, lease_expires_at = NULL, expires_at = NULL,
       last_seen_at = $3, redriven_at = $3, redrive_run = $4,
       result = CASE WHEN $5::pg_catalog.timestamptz IS NULL THEN k.result END,
       last_step = CASE WHEN $5::pg_catalog.timestamptz IS NULL THEN k.last_step END,
       fingerprint = COALESCE((SELECT c.fingerprint FROM webhook_dedup.conflict_log AS c
                                WHERE c.idem_key OPERATOR(pg_catalog.=) $2 AND c.source OPERATOR(pg_catalog.=) $1
                                  AND c.seen_at OPERATOR(pg_catalog.=) $5
                                LIMIT 1), k.fingerprint)
 WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1
