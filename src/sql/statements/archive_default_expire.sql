-- Delete up to $2 rows of the default partition of webhook_dedup.archive
-- that arrived before $1 (past every source's payload retention).
-- Returns how many.
WITH gone AS (
  DELETE FROM webhook_dedup.archive_default AS d
   WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
           SELECT x.ctid FROM webhook_dedup.archive_default AS x
            WHERE x.received_at OPERATOR(pg_catalog.<) $1 LIMIT $2))
  RETURNING 1
)
SELECT pg_catalog.count(*) AS count FROM gone
