-- Whether the source is paused, read from its latest committed row and
-- locked FOR SHARE until the caller's transaction ends: webhook_next
-- confirms a pause its cached settings show before it parks a key
-- (transitions_set_due.sql), so that a resume, which updates the row, waits
-- for the park to commit and then finds the parked key. Under REPEATABLE
-- READ a row changed after the snapshot is 40001. $1 source. No row when
-- the source has none (not paused).
SELECT s.paused_at IS NOT NULL AS paused
  FROM webhook_dedup.sources AS s
 WHERE s.source OPERATOR(pg_catalog.=) $1
   FOR SHARE
