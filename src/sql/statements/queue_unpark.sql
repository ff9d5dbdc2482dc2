-- webhook_dedup.resume: the source's parked keys (queue_park.sql, and
-- those webhook_next parked) are due again as before the pause: a failed
-- key at its retry time, a pending key at its first delivery (so the
-- oldest is taken first, as before). Reads keys_open from infinity only.
-- $1 source. Returns how many.
WITH resumed AS (
  UPDATE webhook_dedup.keys AS k
     SET due_at = CASE WHEN k.state OPERATOR(pg_catalog.=) 'failed' THEN COALESCE(k.next_attempt_at, k.first_seen_at)
                       ELSE k.first_seen_at END
   WHERE k.state OPERATOR(pg_catalog.<>) 'completed'
     AND k.due_at OPERATOR(pg_catalog.=) 'infinity'::pg_catalog.timestamptz
     AND k.state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'failed']::pg_catalog.text[])
     AND k.source OPERATOR(pg_catalog.=) $1
  RETURNING 1
)
SELECT pg_catalog.count(*) AS count FROM resumed
