-- webhook_dedup.cancel_redrive: a running run stops (waits for a batch
-- maintenance is moving); the keys it had not moved stay as they are.
-- $1 run, $2 now, $3 the session user. Returns the run's status before
-- and its moved count; no row for an unknown run.
WITH found AS (
  SELECT r.id, r.status FROM webhook_dedup.redrives AS r WHERE r.id OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE
), cancelled AS (
  UPDATE webhook_dedup.redrives AS r
     SET status = 'cancelled', finished_at = $2, cancelled_by = $3
    FROM found
   WHERE r.id OPERATOR(pg_catalog.=) found.id AND found.status OPERATOR(pg_catalog.=) 'running'
  RETURNING r.moved
)
SELECT found.status AS was,
       COALESCE((SELECT c.moved FROM cancelled AS c),
                (SELECT r.moved FROM webhook_dedup.redrives AS r WHERE r.id OPERATOR(pg_catalog.=) $1)) AS moved
  FROM found
