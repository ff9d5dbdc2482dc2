-- webhook_dedup.pause: the source's keys that wait for webhook_next
-- (pending, and failed ones whose retry webhook_next would take) are
-- parked: due_at infinity, which no take reaches (keys_open is ordered by
-- due_at), until queue_unpark.sql. Processing keys keep their lease (a
-- lapsed one becomes failed and is parked when webhook_next meets it).
-- Reads keys_open (every open key: the source is not in the index).
-- Keys held locked by another transaction are waited for. $1 source.
-- Returns how many were parked.
WITH parked AS (
  UPDATE webhook_dedup.keys AS k
     SET due_at = 'infinity'
   WHERE k.state OPERATOR(pg_catalog.<>) 'completed'
     AND k.due_at OPERATOR(pg_catalog.<) 'infinity'::pg_catalog.timestamptz
     AND k.state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'failed']::pg_catalog.text[])
     AND k.source OPERATOR(pg_catalog.=) $1
  RETURNING 1
)
SELECT pg_catalog.count(*) AS count FROM parked
