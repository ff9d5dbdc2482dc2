-- webhook_dedup.resume: the pause is cleared. The row stays locked until
-- the caller's transaction ends, so a webhook_next that is parking one of
-- the source's keys (it holds the row FOR SHARE, sources_paused.sql) has
-- committed before this returns, and queue_unpark.sql, run next, finds
-- what it parked. $1 source. No row when the source has none.
UPDATE webhook_dedup.sources
   SET paused_at = NULL, paused_by = NULL, pause_reason = NULL
 WHERE source OPERATOR(pg_catalog.=) $1
