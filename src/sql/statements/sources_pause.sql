-- webhook_dedup.pause: the source's row (made when it has none) records
-- the pause; a source paused already keeps its paused_at and paused_by,
-- and takes the new reason. The row stays locked until the caller's
-- transaction ends (webhook_next's check of a pause, sources_paused.sql,
-- waits for it). $1 source, $2 now, $3 session user, $4 reason.
-- Returns the pause's time.
INSERT INTO webhook_dedup.sources AS s (source, paused_at, paused_by, pause_reason)
VALUES ($1, $2, $3, $4)
    ON CONFLICT (source) DO UPDATE
   SET paused_at = COALESCE(s.paused_at, EXCLUDED.paused_at),
       paused_by = CASE WHEN s.paused_at IS NULL THEN EXCLUDED.paused_by ELSE s.paused_by END,
       pause_reason = EXCLUDED.pause_reason
RETURNING s.paused_at
