-- The days (UTC) that have rows in the default partition of
-- webhook_dedup.archive (deliveries archived while no day partition
-- existed), at most 32 per pass. $1 rows before this are past retention
-- (deleted by archive_default_expire.sql, not given a partition).
SELECT DISTINCT pg_catalog.date_trunc('day', d.received_at, 'UTC') AS day
  FROM webhook_dedup.archive_default AS d
 WHERE d.received_at OPERATOR(pg_catalog.>=) $1
 LIMIT 32
