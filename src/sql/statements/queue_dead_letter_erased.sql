-- webhook_next met a locked key whose payload redact erased (it was being
-- processed then, and is due again): it cannot be processed, so it is
-- dead-lettered rather than handed out empty. $1 source, $2 idem_key.
UPDATE webhook_dedup.keys
   SET state = 'dead_lettered', due_at = NULL, next_attempt_at = NULL, lease_expires_at = NULL,
       last_error = 'payload erased by webhook_dedup.redact'
 WHERE idem_key OPERATOR(pg_catalog.=) $2 AND source OPERATOR(pg_catalog.=) $1
