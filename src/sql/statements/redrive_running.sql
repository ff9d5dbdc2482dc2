-- The bulk redrives maintenance moves keys for (src/maintenance/redrive.rs):
-- every running one, oldest first, each locked until the pass's step
-- commits (cancel_redrive waits for the batch in flight; a run another
-- pass holds is skipped).
SELECT r.id, r.source::pg_catalog.text AS source, r.states, r.conflicts
  FROM webhook_dedup.redrives AS r
 WHERE r.status OPERATOR(pg_catalog.=) 'running'
 ORDER BY r.id
   FOR NO KEY UPDATE SKIP LOCKED
